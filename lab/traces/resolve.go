package traces

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/trace/gen"
)

// A Trace is one TRACE argument resolved: a file, a shipped trace or a
// generator with its arguments. Open opens it afresh each time, so that
// any number of replays read it side by side.
type Trace struct {
	// Label is the argument as given: the heading of the trace's table.
	Label string
	// Phases are the phases of a generated scenario (gen.Generator.Phases);
	// nil for any other trace.
	Phases []gen.Phase
	// Generated reports a gen: trace.
	Generated bool
	// About says what the trace is, for the reader of its table: the
	// shipped trace's description, or the generator's, with the figure
	// its source gives to compare with; "" for a file.
	About string

	open  func() (trace.Source, io.Closer, error)
	spool *spool // the decoded events, once Spooled
	sweep bool   // FreesAtSweep
}

// Open returns the trace's events from the start, and what to close when
// done with them. For a file or a shipped trace the Source is a
// *trace.Reader.
func (t Trace) Open() (trace.Source, io.Closer, error) {
	if t.open == nil {
		return nil, nil, fmt.Errorf("%s: not a trace Resolve returned", t.Label)
	}
	return t.open()
}

// GenPrefix starts a TRACE argument that names a generator.
const GenPrefix = "gen:"

// Usage says what a TRACE argument may be, for error messages and help.
func Usage() string {
	return "a file, a shipped trace (" + Names() + ") or gen:NAME[:param=value,...] (" + generatorNames() + ")"
}

// Resolve reads one TRACE argument. A file that exists wins over a
// shipped trace of the same name; an argument that is neither says what a
// TRACE may be. A file is only checked to exist here: Open reads it.
func Resolve(arg string) (Trace, error) {
	return ResolveOptions(arg, trace.ReaderOptions{})
}

// ResolveOptions is Resolve with the options a file or a shipped trace is
// read with.
func ResolveOptions(arg string, opt trace.ReaderOptions) (Trace, error) {
	if spec, ok := strings.CutPrefix(arg, GenPrefix); ok {
		return generated(arg, spec)
	}
	if _, err := os.Stat(arg); err != nil {
		if t, ok := Lookup(arg); ok {
			return Trace{Label: arg, About: t.About + ".", open: func() (trace.Source, io.Closer, error) {
				r, err := trace.NewReaderOptions(t.Open(), t.File, opt)
				if err != nil {
					return nil, nil, err
				}
				return r, r, nil
			}}, nil
		}
		if errors.Is(err, os.ErrNotExist) {
			return Trace{}, fmt.Errorf("%s: no such file, and not a shipped trace (%s) or gen:NAME[:param=value,...]", arg, Names())
		}
		return Trace{}, err
	}
	return Trace{Label: arg, open: func() (trace.Source, io.Closer, error) {
		r, err := trace.OpenOptions(arg, opt)
		if err != nil {
			return nil, nil, err
		}
		return r, r, nil
	}}, nil
}

// Gen returns the TRACE argument that names generator name with args,
// the parameters in name order: gen:connection:n=10000,next=4096.
func Gen(name string, args gen.Args) string {
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var kv []string
	for _, k := range keys {
		kv = append(kv, k+"="+strconv.FormatFloat(args[k], 'f', -1, 64))
	}
	if len(kv) == 0 {
		return GenPrefix + name
	}
	return GenPrefix + name + ":" + strings.Join(kv, ",")
}

func generatorNames() string {
	var names []string
	for _, g := range gen.All() {
		names = append(names, g.Name)
	}
	return strings.Join(names, ", ")
}

// generated reads "NAME" or "NAME:k=v,k=v" after the gen: prefix.
func generated(arg, spec string) (Trace, error) {
	name, params, _ := strings.Cut(spec, ":")
	g, ok := gen.Lookup(name)
	if !ok {
		return Trace{}, fmt.Errorf("%s: unknown generator %q (want one of %s)", arg, name, generatorNames())
	}
	var kv []string
	if params != "" {
		kv = strings.Split(params, ",")
	}
	args, err := g.ParseArgs(kv)
	if err != nil {
		return Trace{}, fmt.Errorf("%s: %v", arg, err)
	}
	phases, err := g.Phases(args)
	if err != nil {
		return Trace{}, fmt.Errorf("%s: %v", arg, err)
	}
	// A trace of up to MaxHeld events is generated once and shared by the
	// replays (a goroutine generating beside each replay would take a core
	// from the replays, and their timings with it); a longer one streams.
	var once sync.Once
	var held []trace.Event
	about := g.Doc
	if g.Compare != "" {
		about += " " + g.Compare
	}
	return Trace{Label: arg, Phases: phases, Generated: true, About: about, open: func() (trace.Source, io.Closer, error) {
		once.Do(func() {
			c := &capped{max: MaxHeld}
			if err := g.Generate(c, args); err == nil {
				held = c.evs
			}
		})
		if held != nil {
			return trace.Events(held), io.NopCloser(nil), nil
		}
		s := newStream(g, args)
		return s, s, nil
	}}, nil
}

// MaxHeld bounds the events of a trace the lab holds in memory rather
// than reads again: 1,048,576 events, 32 MiB.
const MaxHeld = 1 << 20

// capped collects up to max events.
type capped struct {
	evs []trace.Event
	max int
}

var errTooLong = errors.New("trace too long to hold")

func (c *capped) Write(e trace.Event) error {
	if len(c.evs) == c.max {
		return errTooLong
	}
	c.evs = append(c.evs, e)
	return nil
}

// stream runs a generator in a goroutine and hands its events over in
// batches, so that a generated trace of any length is replayed without
// being held in memory.
type stream struct {
	batches chan []trace.Event
	done    chan struct{} // closed by Close: the generator stops
	errc    chan error    // the generator's result
	cur     []trace.Event
	err     error
}

// errStopped stops a generator whose reader has gone.
var errStopped = errors.New("replay stopped")

func newStream(g gen.Generator, args gen.Args) *stream {
	s := &stream{batches: make(chan []trace.Event, 4), done: make(chan struct{}), errc: make(chan error, 1)}
	go func() {
		w := &batchWriter{s: s, buf: make([]trace.Event, 0, 4096)}
		err := g.Generate(w, args)
		if err == nil {
			err = w.flush()
		}
		close(s.batches)
		s.errc <- err
	}()
	return s
}

type batchWriter struct {
	s   *stream
	buf []trace.Event
}

func (w *batchWriter) Write(e trace.Event) error {
	w.buf = append(w.buf, e)
	if len(w.buf) == cap(w.buf) {
		return w.flush()
	}
	return nil
}

func (w *batchWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	select {
	case w.s.batches <- w.buf:
		w.buf = make([]trace.Event, 0, cap(w.buf))
		return nil
	case <-w.s.done:
		return errStopped
	}
}

func (s *stream) Read(dst []trace.Event) (int, error) {
	for len(s.cur) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		b, ok := <-s.batches
		if !ok {
			s.err = <-s.errc
			if s.err == nil {
				s.err = io.EOF
			}
			continue
		}
		s.cur = b
	}
	n := copy(dst, s.cur)
	s.cur = s.cur[n:]
	return n, nil
}

// Close stops the generator if it is still running.
func (s *stream) Close() error {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	return nil
}
