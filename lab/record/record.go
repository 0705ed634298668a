package record

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/carvelab/carve/lab/symbol"
	"github.com/carvelab/carve/lab/trace"
)

// Options tune a recording. The zero value records with the default
// recorder (the go recorder for a go test command), and the program reads
// nothing and its output is discarded.
type Options struct {
	// Recorder is the name of the recorder (see Recorders): "carve"
	// (Default, when empty), "valgrind", "heaptrack", "mtrace" or "go".
	Recorder string
	// Stdin, Stdout and Stderr are the program's own; nil is the null
	// device.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Env is added to the environment of this process for the program
	// ("NAME=value" entries, a later one replacing an earlier one). An
	// LD_PRELOAD in it is kept, after the recorder's library; a GODEBUG,
	// before traceallocfree=1 (the go recorder).
	Env []string
	// GoStacks makes the go recorder write goroutine stacks as objects
	// too (see trace.ReaderOptions).
	GoStacks bool
	// MaxGoGeneration bounds what one generation of a Go execution trace
	// may cost its reader (trace.ReaderOptions.MaxGoGeneration; 0: the
	// default).
	MaxGoGeneration int64
	// MaxTraceBytes bounds the execution trace FromService downloads;
	// 0 is DefaultMaxTraceBytes.
	MaxTraceBytes int64

	// NoStacks makes carve's recorder leave out the allocations' call
	// stacks (and so their sites): its cost is then the lock and the
	// record alone (see Cost in the package documentation).
	NoStacks bool

	sites *Sites // the go recorder's, read from the run's heap profile
}

// Result describes a recording.
type Result struct {
	Recorder string
	// Sites are, for a go test run, the allocation sites of its heap
	// profile, by size (see sites.go): the objects of a size with one
	// site carry it in their label. SitesSampled says the profile was
	// sampled at the user's -memprofilerate, not every allocation;
	// SitesErr why there are none (no profile, or one carve cannot read).
	Sites        *Sites
	SitesSampled bool
	SitesErr     error
	// Process is the process whose trace was written: the busiest of those
	// the recorder logged. Others are the rest (a shell or wrapper that
	// ran the program, children it started), busiest first. For a
	// service (FromService), Process.Program is the trace's URL and
	// Process.Pid is 0.
	Process Process
	Others  []Process
	// Events is the number of events written.
	Events int64
	// Threads is the number of threads that made them, 0 for a recorder
	// that does not record threads.
	Threads int
	// Import is what the importer made of the recorder's log: frees of
	// blocks allocated before recording began, failed calls, allocations
	// the recorder did not show, and so on (see trace.ReaderStats).
	Import trace.ReaderStats
	// GoHeap is the Go runtime's own account of its heap over a go test
	// run, from its execution trace (see trace.GoHeapSample), also
	// written in the trace; nil for the C recorders.
	GoHeap []trace.GoHeapSample
	// StartPause is the stop-the-world pause in which a Go execution
	// trace started, as the trace records it: with
	// GODEBUG=traceallocfree=1 the runtime writes a snapshot of the
	// whole heap (an event for every object alive) with the world
	// stopped. It is 0 for the C recorders and for a trace that records
	// no such pause.
	StartPause time.Duration
	// CSites describes the allocation sites of a C recorder's trace
	// (carve's recorder, heaptrack): the call stacks it kept, each
	// allocation's site its innermost frame (see trace.SiteName).
	CSites CSites
	// CHeapOnly reports the trace of a Go program built with cgo,
	// recorded by a C recorder: it holds the program's C allocations
	// only, not its Go heap.
	CHeapOnly bool
	// Cut counts the records of Process that its end cut short, left out
	// of the trace: carve's recorder writes each record whole into a
	// shared mapping of its log, so a signal or SIGKILL cuts at most one,
	// the call the process was in.
	Cut int
	// Stopped, when not empty, says why carve's recorder stopped
	// recording Process before it ended (its log could not grow: a full
	// disk): the calls after the trace's last event are lost.
	Stopped string
	// ProcessRSS is the samples of the recorded process's RSS written in
	// the trace, its "R" lines (see trace.ProcessRSS): Record reads
	// VmRSS and VmHWM of the processes of the run every RSSEvery, and
	// keeps those of the test binary of a go test run, of a binary that
	// traces itself, or of the process whose log a C recorder's trace
	// holds (valgrind's process, the program in it). A Go execution
	// trace's samples are placed among its events by its clock
	// snapshots; a C recorder's log has no clock, and its trace holds the
	// peak only: one sample, not placed (Event -1), of the largest VmRSS
	// and VmHWM sampled, its VmHWM raised to the process's peak as it
	// was waited for (wait4's ru_maxrss) where the trace is of the
	// process started and the recorder saw no other (RSSAtExit): the
	// peak of a program that ends before the first sample. RSSSampled is
	// the number of samples taken of the process (more than were written
	// for a peak only), and NoRSS, when none were written, says why.
	ProcessRSS []trace.ProcessRSS
	RSSSampled int
	RSSAtExit  bool
	NoRSS      string
}

// CSites counts the sites of a C program's trace: Allocs is the
// allocations (reallocs included) whose call stack the recorder kept,
// Bytes their bytes, of AllBytes allocated in all; Sites the distinct
// sites, Unnamed those named by address only (no symbol covers the
// return address: a stripped binary names its exported functions only),
// and NoSymbols the binaries carve could not read, each with why.
type CSites struct {
	Allocs, Sites, Unnamed int
	Bytes, AllBytes        uint64
	NoSymbols              []string
}

// Process is one program run that a recorder logged: a process, or a
// program that a process exec'd.
type Process struct {
	Pid     int
	Program string // its executable's path, when the recorder tells it
	Lines   int64  // the lines of its log: about one per allocator call
}

// ErrNoEvents is wrapped by Record's error when the program made no
// allocation that the recorder saw. Record then writes nothing.
var ErrNoEvents = errors.New("record: no allocation recorded")

// ExitError reports a program that did not exit with status 0. Record
// returns it after writing the trace of what the program did until then.
type ExitError struct {
	Code  int // the exit status, or -1 when a signal ended the program
	State *os.ProcessState
}

func (e *ExitError) Error() string {
	return "record: the program ended with " + e.State.String()
}

// Record runs cmd (the program and its arguments) under a recorder and
// writes its allocation trace to out in carve's native format.
//
// A go test command is recorded from its execution trace (the go
// recorder; see the package documentation, Go programs), and so is a Go
// binary that traces itself with package selftrace (its errors wrap
// ErrSelftrace); any other Go binary built without cgo is not run (the
// error wraps ErrGoProgram).
//
// The recorder logs each process of the run on its own; Record converts
// the busiest (most lines logged) and lists the others in the Result. A
// program that exits non-zero, or that a signal ends, still has its
// trace written, and the error is an *ExitError. When nothing was
// recorded Record writes nothing and its error wraps ErrNoEvents (joined
// with the *ExitError, if any). When ctx is done the program gets an
// interrupt, and a kill 5 seconds later; what it logged until then is
// written and the error wraps ctx.Err().
//
// The recorder's logs go to a temporary directory, removed at the end.
// A log that its importer cannot read ends the conversion with the
// importer's error; out then holds the events before it.
// Record is safe for concurrent use.
func Record(ctx context.Context, cmd []string, out io.Writer, opt Options) (Result, error) {
	rec, err := recorderNamed(opt.Recorder)
	if err != nil {
		return Result{}, err
	}
	if len(cmd) == 0 {
		return Result{Recorder: rec.Name}, errors.New("record: no program to run")
	}
	if _, isTest, err := parseGoTest(cmd, ""); isTest {
		res := Result{Recorder: goRecorder.Name}
		switch {
		case err != nil:
			return res, err
		case rec != carveRecorder && rec != goRecorder:
			return res, fmt.Errorf("%w: a go test command is recorded from its execution trace, not by the %s recorder (which sees C allocations): leave the recorder out", ErrUsage, rec.Name)
		}
		return res, recordGoTest(ctx, cmd, out, opt, &res)
	}
	res := Result{Recorder: rec.Name}
	if _, err := exec.LookPath(cmd[0]); err != nil {
		return res, fmt.Errorf("record: %w", err)
	}
	bin := goBinary(cmd)
	if bin != nil && bin.selftrace != noSelftrace && (rec == carveRecorder || rec == goRecorder) {
		res.Recorder = goRecorder.Name
		return res, recordSelftrace(ctx, cmd, out, opt, &res)
	}
	if rec == goRecorder {
		return res, fmt.Errorf("%w: the go recorder records go test commands and binaries built with package selftrace; %s", ErrUsage, howToRecordGo)
	}
	if runtime.GOOS != "linux" {
		return res, fmt.Errorf("record: recording needs Linux (LD_PRELOAD, glibc), not %s", runtime.GOOS)
	}
	isGo := bin != nil
	if isGo && !bin.cgo {
		return res, fmt.Errorf("%w: %s is a Go binary built without cgo, which calls no C malloc (%w)%s; %s",
			ErrGoProgram, cmd[0], ErrNoEvents, bin.whyNoSelftrace(), howToRecordGo)
	}
	res.CHeapOnly = isGo
	dir, err := os.MkdirTemp("", "carve-record-")
	if err != nil {
		return res, fmt.Errorf("record: %w", err)
	}
	defer os.RemoveAll(dir)

	argv, env, err := rec.prepare(dir, cmd)
	if err != nil {
		return res, err
	}
	if opt.NoStacks && rec == carveRecorder {
		env = append(env, stacksVar+"=0")
	}
	rss := newRSSSampler("")
	pid, runErr := run(ctx, argv, environ(os.Environ(), opt.Env, env), opt, rss)
	if pid == 0 { // did not start
		return res, runErr
	}

	logs, err := findLogs(dir, pid, rec)
	if err != nil {
		return res, errors.Join(err, runErr)
	}
	var noEvents error
	if len(logs) == 0 || logs[0].Lines == 0 {
		noEvents = rec.empty(logs)
	} else {
		res.Process = logs[0].Process
		res.Cut, res.Stopped = logs[0].cut, logs[0].stopped
		for _, l := range logs[1:] {
			res.Others = append(res.Others, l.Process)
		}
		of := trace.RSSProgram
		if rec == valgrindRecorder {
			of = trace.RSSValgrind
		}
		sampled := rss.of(cmp.Or(res.Process.Pid, pid))
		var exitHWM uint64
		if rss != nil && cmp.Or(res.Process.Pid, pid) == pid && len(res.Others) == 0 {
			// The trace is of the process started, and it started no
			// other the recorder saw: its peak at exit is its own.
			exitHWM = rss.exitHWM
		}
		peak, ok := rssPeak(sampled, exitHWM, of)
		switch {
		case rss == nil:
			res.NoRSS = noRSSOS
		case !ok && rss.exitHWM > 0:
			res.NoRSS = noRSSExit
		case !ok:
			res.NoRSS = noRSSProcess
		}
		err := convert(&res, logs[0], rec.format, out, comment(rec.Name, cmd, logs, isGo), peak, ok)
		if len(res.ProcessRSS) > 0 {
			res.RSSSampled, res.RSSAtExit = len(sampled), exitHWM > 0
		}
		if err != nil {
			return res, errors.Join(err, runErr)
		}
		if res.Events == 0 {
			noEvents = rec.empty(logs)
		}
	}
	if noEvents != nil && isGo {
		noEvents = fmt.Errorf("%w: %s is a Go binary, built with cgo, and made no C allocation the %s recorder saw (%w); %s",
			ErrGoProgram, cmd[0], rec.Name, noEvents, howToRecordGo)
	}
	return res, errors.Join(runErr, noEvents)
}

// run runs the recorder's command line and returns the pid it ran as (0
// if it did not start) and an error for a failure to start, an exit
// status other than 0 (an *ExitError) or ctx done. rss, when not nil,
// samples the RSS of the process and its descendants while it runs.
func run(ctx context.Context, argv, env []string, opt Options, rss *rssSampler) (int, error) {
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Env = env
	c.Stdin, c.Stdout, c.Stderr = opt.Stdin, opt.Stdout, opt.Stderr
	c.Cancel = func() error { return c.Process.Signal(os.Interrupt) }
	c.WaitDelay = 5 * time.Second
	if err := c.Start(); err != nil {
		return 0, fmt.Errorf("record: %w", err)
	}
	rss.start(c.Process.Pid)
	err := c.Wait()
	rss.stop()
	rss.exited(c.ProcessState)
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return c.Process.Pid, fmt.Errorf("record: stopped: %w", ctx.Err())
	case errors.As(err, &exit):
		return c.Process.Pid, &ExitError{Code: exit.ExitCode(), State: exit.ProcessState}
	case errors.Is(err, exec.ErrWaitDelay):
		// The program exited; something it started still held its
		// output open, and was cut off.
		return c.Process.Pid, nil
	case err != nil:
		return c.Process.Pid, fmt.Errorf("record: %w", err)
	}
	return c.Process.Pid, nil
}

// environ returns base with extra and then the recorder's entries rec
// added. The recorder's LD_PRELOAD goes first, before any other the
// environment holds, so that its library sees the calls first and finds
// the allocator that another preloaded library provides.
func environ(base, extra, rec []string) []string {
	env := append(slices.Clip(base), extra...)
	for _, e := range rec {
		lib, ok := strings.CutPrefix(e, preload)
		if !ok {
			env = append(env, e)
			continue
		}
		if old := lookup(env, "LD_PRELOAD"); old != "" {
			lib += ":" + old
		}
		env = append(env, preload+lib)
	}
	return env
}

// lookup returns the value of the last entry for name in env.
func lookup(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// logFile is one process's log.
type logFile struct {
	Process
	path string
	// size is the length of the log's complete records, read; -1 is the
	// whole file.
	size int64
	// cut counts the records cut short past size (0 or 1), and stopped
	// says why the recorder stopped recording the process, if it did:
	// carve's library (see preload/carve.c).
	cut     int
	stopped string
}

// findLogs lists the logs in dir, busiest first. Logs are named
// "<pid>-<k>.log" by carve's libraries and valgrind, with the program's
// path in "<pid>-<k>.exe" for carve's; a log without a pid in its name
// is that of the process started, pid. The log of a recorder that maps
// its log (carve's) ends at its last complete record, before the zeros
// of the space it had not used.
func findLogs(dir string, pid int, rec *recorder) ([]logFile, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	logs := make([]logFile, 0, len(paths))
	for _, path := range paths {
		l := logFile{path: path}
		base := strings.TrimSuffix(filepath.Base(path), ".log")
		if p, _, ok := strings.Cut(base, "-"); ok {
			l.Pid, _ = strconv.Atoi(p)
		}
		if l.Pid == 0 {
			l.Pid = pid
		}
		head, lines, size, cut, err := countLines(path, rec.mapped)
		if err != nil {
			return nil, err
		}
		l.Lines, l.size, l.cut = lines, size, cut
		if rec.mapped {
			l.stopped = stopped(strings.TrimSuffix(path, ".log") + ".stopped")
		}
		if exe, err := os.ReadFile(strings.TrimSuffix(path, ".log") + ".exe"); err == nil {
			l.Program = string(exe)
		} else if rec.program != nil {
			l.Program = rec.program(head)
		}
		logs = append(logs, l)
	}
	slices.SortStableFunc(logs, func(a, b logFile) int {
		return cmp.Or(cmp.Compare(b.Lines, a.Lines), cmp.Compare(a.Pid, b.Pid))
	})
	return logs, nil
}

// countLines returns the first 4 KiB of the file at path and its number
// of lines. For a mapped log (see preload/carve.c), whose records end
// at its first zero byte, it also returns the length of its complete
// records (up to the last newline before that byte) and the number of
// records cut short past them (0 or 1); size is -1 otherwise.
func countLines(path string, mapped bool) (head []byte, lines, size int64, cut int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, 0, 0, fmt.Errorf("record: %w", err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	var off, complete int64 // the bytes read; those up to the last newline
	for {
		n, err := f.Read(buf)
		b := buf[:n]
		end := false
		if mapped {
			if i := bytes.IndexByte(b, 0); i >= 0 {
				b, end = b[:i], true
			}
		}
		if head == nil && len(b) > 0 {
			head = bytes.Clone(b[:min(len(b), 4<<10)])
		}
		lines += int64(bytes.Count(b, []byte{'\n'}))
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			complete = off + int64(i) + 1
		}
		off += int64(len(b))
		if end || err == io.EOF {
			if !mapped {
				return head, lines, -1, 0, nil
			}
			if off > complete {
				cut = 1
			}
			return head[:min(len(head), int(complete))], lines, complete, cut, nil
		}
		if err != nil {
			return nil, 0, 0, 0, fmt.Errorf("record: %w", err)
		}
	}
}

// stopped reads the file carve's library writes when it stops recording
// a process ("<length of the log> <error number>") and says why, or
// returns "" when there is none.
func stopped(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var at int64
	var errno int
	if _, err := fmt.Sscan(string(b), &at, &errno); err != nil {
		return fmt.Sprintf("carve's library stopped recording (%q)", bytes.TrimSpace(b))
	}
	return fmt.Sprintf("carve's library stopped recording after %d bytes of records: its log could not grow (%v)", at, syscall.Errno(errno))
}

// convert reads the log l in format and writes its events to out,
// filling res's Events, Threads and Import. A trace without an
// allocation is no trace: frees before the first allocation (of blocks
// allocated before recording began) are held back until one comes, and
// nothing at all is written if none does. With a peak of the program's
// RSS (hasPeak), the trace is of version 3 and ends with the peak's "R"
// line (res.ProcessRSS). A log whose allocations have call stacks gives
// them labels of their sites, named by package symbol (res.CSites).
func convert(res *Result, l logFile, format trace.Format, out io.Writer, comment string, peak trace.ProcessRSS, hasPeak bool) error {
	f, err := os.Open(l.path)
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	defer f.Close()
	var rd io.Reader = f
	if l.size >= 0 {
		rd = io.LimitReader(f, l.size)
	}
	syms := symbol.New()
	defer syms.Close()
	r, err := trace.NewReaderOptions(rd, l.path, trace.ReaderOptions{Format: format, Symbolizer: syms})
	if err != nil {
		return err
	}
	defer r.Close()
	defer func() { res.CSites = cSites(res.CSites, r.Labels(), syms) }()
	defer func() { res.Import = r.Stats() }()
	w := trace.NewWriter(out)
	if labels := r.Labels(); labels != nil || hasPeak {
		if labels == nil {
			labels = &trace.Labels{}
		}
		if err := w.SetLabels(labels); err != nil {
			return err
		}
	}
	var held []trace.Event // the frees before the first allocation
	started := false
	threads := map[uint32]bool{}
	last := uint32(0)
	buf := make([]trace.Event, 4096)
	for {
		n, err := r.Read(buf)
		for _, e := range buf[:n] {
			if !started {
				if e.Op == trace.Free {
					held = append(held, e)
					continue
				}
				started = true
				if err := w.Comment(comment); err != nil {
					return err
				}
				for _, h := range held {
					if err := write(w, h, &last, threads); err != nil {
						return err
					}
				}
				res.Events += int64(len(held))
			}
			if err := write(w, e, &last, threads); err != nil {
				return err
			}
			res.Events++
			if e.Op != trace.Free {
				res.CSites.AllBytes += e.Size
				if e.Label != 0 {
					res.CSites.Allocs++
					res.CSites.Bytes += e.Size
				}
			}
		}
		if err == io.EOF || errors.Is(err, trace.ErrNoEvent) && res.Events == 0 {
			break // a log of no call: the caller says so (ErrNoEvents)
		}
		if err != nil {
			return fmt.Errorf("record: reading the %s log: %w", format, err)
		}
	}
	res.Threads = len(threads)
	if !started {
		return nil
	}
	if hasPeak {
		if err := w.ProcessRSS(peak); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if hasPeak {
		res.ProcessRSS = []trace.ProcessRSS{peak}
	}
	return nil
}

// cSites completes c, counted as the events were written, with the
// sites of labels and the binaries syms could not read.
func cSites(c CSites, labels *trace.Labels, syms *symbol.Table) CSites {
	for l := uint32(1); int(l) <= labels.Len(); l++ {
		lab, _ := labels.Label(l)
		site, ok := lab.Attr(trace.AttrSite)
		if !ok {
			continue
		}
		c.Sites++
		if trace.SiteUnnamed(site) {
			c.Unnamed++
		}
	}
	for _, p := range syms.Failed() {
		c.NoSymbols = append(c.NoSymbols, p+": "+syms.Err(p).Error())
	}
	return c
}

// write writes e and notes its thread in threads (last: the thread of
// the event before).
func write(w *trace.Writer, e trace.Event, last *uint32, threads map[uint32]bool) error {
	if e.Thread != *last && e.Thread != 0 {
		threads[e.Thread] = true
		*last = e.Thread
	}
	return w.Write(e)
}

// comment describes the recording at the head of the trace; cHeap says
// the program is a Go program, of which the trace holds the C heap only.
func comment(recorder string, cmd []string, logs []logFile, cHeap bool) string {
	p := logs[0]
	s := fmt.Sprintf("recorded by carve record --recorder %s -- %s\nprocess %d", recorder, commandLine(cmd), p.Pid)
	if p.Program != "" {
		s += " (" + p.Program + ")"
	}
	if len(logs) > 1 {
		s += fmt.Sprintf(", the busiest of %d logged", len(logs))
	}
	if cHeap {
		s += "\nonly the C heap of a Go program (built with cgo): its Go heap is not in this trace"
	}
	return s
}

// commandLine joins a command line, quoting the arguments that hold
// blanks, quotes or a shell's special bytes, cut to 1000 bytes.
func commandLine(cmd []string) string {
	args := make([]string, len(cmd))
	for i, a := range cmd {
		args[i] = a
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`") {
			args[i] = strconv.Quote(a)
		}
	}
	line := strings.Join(args, " ")
	if len(line) > 1000 {
		n := 1000
		for !utf8.RuneStart(line[n]) {
			n--
		}
		line = line[:n] + "..."
	}
	return line
}

// Inputs returns the files a recording of cmd reads or runs, which its
// trace must not be written over: the program (cmd[0] as the PATH finds
// it: for a go test command, the go command), a go test command's own
// -trace file, and every argument that names an existing file (the
// program may read it).
func Inputs(cmd []string) []string {
	if len(cmd) == 0 {
		return nil
	}
	var in []string
	if prog, err := exec.LookPath(cmd[0]); err == nil {
		in = append(in, prog)
	}
	if t, _, err := parseGoTest(cmd, ""); t != nil && err == nil && t.ownTrace {
		in = append(in, t.tracePath(""))
	}
	for _, a := range cmd[1:] {
		if _, err := os.Stat(a); err == nil {
			in = append(in, a)
		}
	}
	return in
}
