package trace

import (
	"fmt"
	"slices"
	"strconv"
	"time"
)

// A ProcessRSS is the recorded program's resident memory at one moment
// of its run, as the kernel reported it (/proc/PID/status): carve record
// samples it every 100 ms while the program runs. A native trace of
// version 3 carries the samples as "R" lines.
type ProcessRSS struct {
	// Event is the sample's place in the trace: the number of events
	// before it (a Go execution trace's clock snapshots place a sample
	// taken by the wall clock). -1 is a sample not placed: a trace
	// without a clock carries only the run's peak, one sample of -1.
	Event int64
	// RSS and HWM are VmRSS and VmHWM, in bytes: the resident set then,
	// and its peak since the process started (the kernel's high-water
	// mark, exact at any moment; the last sample's is the run's peak up
	// to the last 100 ms).
	RSS, HWM uint64
	// Of is which process was sampled: one of RSSTestBinary, RSSProgram
	// and RSSValgrind.
	Of string
}

// The processes a ProcessRSS may be of: the words of an "R" line.
const (
	// RSSTestBinary is the test binary of a go test run (not the go
	// command, the compiler or the linker).
	RSSTestBinary = "test"
	// RSSProgram is the program itself: for a C recorder, its library's
	// buffers included (they live in the program); for a Go binary that
	// traces itself, its execution trace's buffers included.
	RSSProgram = "program"
	// RSSValgrind is valgrind's process, in which the program runs: its
	// memory is valgrind's and the program's together.
	RSSValgrind = "valgrind"
)

// rssOf lists the processes a ProcessRSS may be of, with what each is
// called in a sentence ("the program's RSS ..., of <what>").
var rssOf = map[string]string{
	RSSTestBinary: "the test binary",
	RSSProgram:    "the program, the recorder's buffers included",
	RSSValgrind:   "valgrind's process, the program inside it",
}

// RSSOfText says which process RSS samples of of are: "the test binary",
// say. It is "" for a word that is none of those.
func RSSOfText(of string) string { return rssOf[of] }

// MaxProcessRSS is the most samples of the program's RSS a Reader keeps
// (40 bytes each: 10 MiB, 7 hours at one sample every 100 ms); a trace
// of more stops with an error wrapping ErrTooManyLive. carve record's
// sampler coarsens its series to stay below it.
const MaxProcessRSS = 1 << 18

// RSSPeak returns the largest VmRSS and VmHWM of samples, and whether
// there were any.
func RSSPeak(samples []ProcessRSS) (rss, hwm uint64, ok bool) {
	for _, s := range samples {
		rss, hwm = max(rss, s.RSS), max(hwm, s.HWM)
	}
	return rss, hwm, len(samples) > 0
}

// ClockedPeak returns the largest VmRSS and VmHWM of samples, in one
// sample without a time.
func ClockedPeak(samples []ClockedRSS) ClockedRSS {
	var peak ClockedRSS
	for _, s := range samples {
		peak.RSS, peak.HWM = max(peak.RSS, s.RSS), max(peak.HWM, s.HWM)
	}
	return peak
}

// A ClockedRSS is a sample of the program's RSS taken by the clocks of
// the machine, for a Reader of a Go execution trace to place by the
// trace's clock snapshots (ReaderOptions.ProcessRSS).
type ClockedRSS struct {
	// Mono is CLOCK_MONOTONIC in nanoseconds when the sample was taken
	// (0: not known), Wall the wall clock's time; the snapshot's Mono is
	// used when both have one, Wall otherwise.
	Mono     uint64
	Wall     time.Time
	RSS, HWM uint64
}

// processRSS is the samples of a trace, and, for Copy, those not taken.
type processRSS struct {
	samples []ProcessRSS
	taken   int
	last    int64 // the place of the last sample placed (0: none)
}

// add appends s.
func (p *processRSS) add(s ProcessRSS) error {
	if len(p.samples) == MaxProcessRSS {
		return fmt.Errorf("%w (more than %d samples of the program's RSS)", ErrTooManyLive, MaxProcessRSS)
	}
	p.samples = append(p.samples, s)
	p.last = max(p.last, s.Event)
	return nil
}

// take returns the samples added since the last take.
func (p *processRSS) take() []ProcessRSS {
	s := p.samples[p.taken:]
	p.taken = len(p.samples)
	return s
}

// ProcessRSS returns the samples of the recorded program's RSS read so
// far, in order: a native trace's "R" lines (version 3), or, for a Go
// execution trace, the samples ReaderOptions.ProcessRSS gave, placed by
// the trace's clock snapshots as the events they fall among are read
// (those after the trace's last event at its end; with no snapshot, Go
// before 1.25, only their peak, not placed, at the end). Nil for a trace
// without any.
func (r *Reader) ProcessRSS() []ProcessRSS { return slices.Clone(r.rss.samples) }

// takeProcessRSS returns the samples read since it was last called.
func (r *Reader) takeProcessRSS() []ProcessRSS { return r.rss.take() }

// rssTaker is a Source whose samples of the program's RSS Copy takes as
// it reads: a *Reader, or a type that embeds one.
type rssTaker interface {
	takeProcessRSS() []ProcessRSS
}

// goClock places the samples a Go execution trace's Reader was given.
type goClock struct {
	due []ClockedRSS // not placed yet, in the order taken
	of  string
	// The last clock snapshot: the trace's time (ns) then, and the
	// machine's clocks. ok: one came.
	ok         bool
	trace      int64
	mono       uint64
	wall       time.Time
	at         int64 // due[0]'s time on the trace's clock, when ok
	atSnapshot bool  // at is computed from the current snapshot
}

// traceTime returns the time of s on the trace's clock, by the last
// snapshot.
func (c *goClock) traceTime(s ClockedRSS) int64 {
	if s.Mono != 0 && c.mono != 0 {
		return c.trace + int64(s.Mono) - int64(c.mono)
	}
	return c.trace + int64(s.Wall.Sub(c.wall))
}

// goPlaceRSS places the samples due by the trace's time now: each that
// was taken by then goes before the events made from now on.
func (r *Reader) goPlaceRSS(now int64) error {
	c := &r.gotr.clock
	if !c.ok {
		return nil
	}
	for len(c.due) > 0 {
		if !c.atSnapshot {
			c.at, c.atSnapshot = c.traceTime(c.due[0]), true
		}
		if c.at > now {
			return nil
		}
		if err := r.goAddRSS(r.gotr.made, c.due[0]); err != nil {
			return err
		}
		c.due, c.atSnapshot = c.due[1:], false
	}
	return nil
}

// goAddRSS keeps s, placed at event (-1: not placed).
func (r *Reader) goAddRSS(event int64, s ClockedRSS) error {
	if err := r.rss.add(ProcessRSS{Event: event, RSS: s.RSS, HWM: s.HWM, Of: r.gotr.clock.of}); err != nil {
		return r.goError(err)
	}
	return nil
}

// goEndRSS places the samples left at the trace's end: after its last
// event, or, when the trace had no clock snapshot, their peak only.
func (r *Reader) goEndRSS() error {
	c := &r.gotr.clock
	if len(c.due) == 0 {
		return nil
	}
	if !c.ok {
		peak := ClockedPeak(c.due)
		c.due = nil
		return r.goAddRSS(-1, peak)
	}
	for _, s := range c.due {
		if err := r.goAddRSS(r.gotr.made, s); err != nil {
			return err
		}
	}
	c.due = nil
	return nil
}

// nativeProcessRSS is the syntax of the native format's samples of the
// program's RSS.
const nativeProcessRSS = `"R <events before>|- <VmRSS bytes> <VmHWM bytes> test|program|valgrind"`

// parseProcessRSS reads an "R" line of a native v3 trace.
func (r *Reader) parseProcessRSS(line []byte) (bool, error) {
	i, ok := space(line, 1)
	at := int64(-1)
	if ok && i < len(line) && line[i] == '-' {
		i++
	} else if ok {
		var v uint64
		v, i, ok = dec(line, i)
		at = int64(min(v, 1<<62))
	}
	var rss, hwm uint64
	if ok {
		if rss, i, ok = decField(line, i); ok {
			hwm, i, ok = decField(line, i)
		}
	}
	var of string
	if ok {
		var j int
		if j, ok = space(line, i); ok {
			i = word(line, j)
			of = string(line[j:i])
		}
	}
	if !ok || !blank(line, i) {
		return false, r.syntaxError("program's RSS", nativeProcessRSS, line)
	}
	last := r.rss.last
	switch {
	case rssOf[of] == "":
		return false, r.syntaxError("program's RSS", `the process sampled: "test", "program" or "valgrind"`, line)
	case len(r.rss.samples) > 0 && r.rss.samples[0].Of != of:
		return false, r.syntaxError("program's RSS", fmt.Sprintf("a sample of the process of the samples before (%q)", r.rss.samples[0].Of), line)
	case rss > hwm:
		return false, r.syntaxError("program's RSS", "a VmRSS at most the VmHWM (the peak of VmRSS)", line)
	case at > r.stats.Events:
		return false, r.syntaxError("program's RSS", fmt.Sprintf("a sample placed by the %d events read so far", r.stats.Events), line)
	case at >= 0 && at < last:
		return false, r.syntaxError("program's RSS", fmt.Sprintf("a sample placed at or after the last one (after %d events)", last), line)
	}
	if err := r.rss.add(ProcessRSS{Event: at, RSS: rss, HWM: hwm, Of: of}); err != nil {
		return false, fmt.Errorf("%s:%d: %w", r.name, r.lines.n, err)
	}
	return r.skip()
}

// ProcessRSS writes s as an "R" line, a sample of the recorded program's
// RSS. Only a Writer of version 3 (SetLabels) writes them; s.Event must
// be -1 (not placed) or not pass the events written so far, and s.Of one
// of RSSTestBinary, RSSProgram and RSSValgrind.
func (w *Writer) ProcessRSS(s ProcessRSS) error {
	if w.err != nil {
		return w.err
	}
	switch {
	case w.labels == nil:
		return fmt.Errorf("trace: Writer.ProcessRSS: samples of the program's RSS need version 3 of the format (Writer.SetLabels)")
	case s.Event < -1 || s.Event > w.events:
		return fmt.Errorf("trace: Writer.ProcessRSS: a sample after %d events, written after %d", s.Event, w.events)
	case rssOf[s.Of] == "":
		return fmt.Errorf("trace: Writer.ProcessRSS: a sample of %q (want %q, %q or %q)", s.Of, RSSTestBinary, RSSProgram, RSSValgrind)
	case s.RSS > s.HWM:
		return fmt.Errorf("trace: Writer.ProcessRSS: a VmRSS of %d above its VmHWM of %d", s.RSS, s.HWM)
	}
	w.writeHeader()
	w.buf = append(w.buf, "R "...)
	if s.Event < 0 {
		w.buf = append(w.buf, '-')
	} else {
		w.buf = strconv.AppendInt(w.buf, s.Event, 10)
	}
	w.buf = append(w.buf, ' ')
	w.buf = strconv.AppendUint(w.buf, s.RSS, 10)
	w.buf = append(w.buf, ' ')
	w.buf = strconv.AppendUint(w.buf, s.HWM, 10)
	w.buf = append(w.buf, ' ')
	w.buf = append(w.buf, s.Of...)
	w.buf = append(w.buf, '\n')
	return w.flushIfFull()
}
