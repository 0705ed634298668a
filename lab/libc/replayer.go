package libc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"unsafe"
)

// Replayer is a plain C process performing batches of [Op] on the malloc
// that LD_PRELOAD names: the real mallocs' rows of carve's lab. A C
// allocator inside a Go process is not what a C program sees: the Go
// runtime's threads, cgo's start-up and the mallocs made before the first
// op change the allocator's state (glibc, called from a thread other than
// the main one, serves it from an mmap'd arena of its own instead of the
// main arena) and its process's baseline RSS. The replayer runs no Go:
// it is a small C program (creplay/main.c with this package's probe.c and
// loop.c), built with the system's C compiler at first use and cached
// (see [StartReplayer]), linked against nothing but libc, performing the
// ops on its main thread with the same loop as [Loop], and taking nothing
// from malloc itself (its buffers are static, its slot table mmap'd).
//
// # Figures
//
// The replayer measures at its baseline, after the allocator served its
// first request (free(malloc(1))) and before the first op, what
// [Replayer.Startup] returns: the allocator's own statistic (as [Stats]
// reads it), the process's anonymous RSS, and its RSS, to which it resets
// the kernel's high-water mark (VmHWM, by writing 5 to
// /proc/self/clear_refs). After each batch it reports ([Report]) the time
// its ops took, the statistic, the anonymous RSS, and the high-water mark
// since its previous report, which it then resets: the largest RSS the
// batch reached, which the kernel keeps even when the allocator gave
// pages back before the batch ended. [Report.Resident] is what the lab
// calls the replay's resident memory at that report.
//
// # Identity
//
// The loader ignores an LD_PRELOAD library it cannot find, and the
// replayer then runs on glibc: it names the malloc that serves it with
// the same probe as [Active], and [Replayer.Identity] returns it. A caller
// that asked for jemalloc compares the name and refuses to report a row
// it did not measure.
//
// # Cost
//
// A batch crosses a pipe (24 bytes an op) and its report comes back on
// another: two context switches, the copies, the allocator's statistic
// and the reading of /proc/self/statm and /proc/self/status. On a 2-core
// machine a report after no ops takes 15 to 20 µs, and a batch of 4096
// ops about 40 µs more than its ops take in C, so send batches of
// thousands of ops (Run splits a longer one into pieces of 4096).
// Replaying the shipped trace in batches of 4096 (BenchmarkLoop, three
// runs at a load of 0.3) costs 112 to 135 ns an event against 90 with a
// Loop in process, of which the replayer's own loop takes the same 90
// (most of it timing each call; see [Loop]).
//
// A Replayer is not safe for concurrent use. It is Linux only: it reads
// /proc, and mremap grows its table.
type Replayer struct {
	cmd    *exec.Cmd
	ops    *os.File // the batches, written here: the replayer's fd 3
	rep    *os.File // the reports, read here: its fd 4
	stderr *stderrHead
	id     Identity
	kind   mallocKind
	start  Startup
	page   int64
	in     [reportSize]byte
	done   bool // Close was called
}

// Startup is what a Replayer measured at its baseline (see Figures in
// the type's documentation).
type Startup struct {
	// Heap is the allocator's own statistic, with HeapErr nil, or the
	// zero HeapStats and HeapErr wrapping ErrNoStats.
	Heap    HeapStats
	HeapErr error
	// AnonRSS is the process's anonymous RSS (statm's resident less its
	// shared pages): the allocator's start-up memory with the replayer's
	// own few pages (its static buffers, the C runtime's).
	AnonRSS int64
	// RSS is the process's RSS, file-backed pages included: the baseline
	// of the high-water mark.
	RSS int64
}

// Report is what a Replayer measured after a batch.
type Report struct {
	// Done is the ops of the batch completed: all of them, or the index
	// of the one that failed.
	Done int
	// Nanos is the time spent inside the allocator's calls of the batch,
	// timed in C as [Loop.Elapsed] times them: not the loop's
	// bookkeeping, its writes with touch or the pipes.
	Nanos int64
	// OffCPU is the time taken off Nanos as the replayer's thread was
	// off the CPU in a call (preempted or blocked), as [Loop.OffCPU].
	OffCPU int64
	// Heap is the allocator's statistic after the batch (HeapErr as in
	// Startup).
	Heap    HeapStats
	HeapErr error
	// AnonRSS is the process's anonymous RSS after the batch.
	AnonRSS int64
	// PeakRSS is the kernel's high-water mark of the process's RSS
	// (VmHWM) since the previous report: the largest RSS the batch
	// reached.
	PeakRSS int64
	// TableBytes is the bytes of the replayer's slot table that its slots
	// used, rounded up to whole pages: at most what the table adds to the
	// RSS.
	TableBytes int64
}

// Resident returns the resident memory the replay holds at the report,
// above the baseline s: the larger of the anonymous RSS's growth and the
// high-water mark above the baseline's RSS (the kernel's counters lag,
// and the mark keeps a peak the batch reached and left), less the slot
// table's pages; never below 0.
func (r Report) Resident(s Startup) int64 {
	return max(max(r.AnonRSS-s.AnonRSS, r.PeakRSS-s.RSS)-r.TableBytes, 0)
}

// The protocol's numbers: creplay/main.c says the same.
const (
	replayerMagic    = 0x43525031 // "CRP1"
	replayerProtocol = 2
	helloSize        = 544
	reportSize       = 80
	maxOps           = 4096 // the most ops one batch carries
	opSize           = 24
)

// ReplayerAvailable reports whether StartReplayer can work here, and if
// not why: it needs Linux, and the replayer built or a C compiler to
// build it. It needs no cgo.
func ReplayerAvailable() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("libc: the C replayer runs on Linux only, not %s", runtime.GOOS)
	}
	return replayerBuildable()
}

// StartReplayer starts a C replayer with LD_PRELOAD=preload (none when
// preload is "", whatever the environment said: the process runs on
// glibc) and waits for its baseline. With touch, its loop writes every
// byte of new blocks (see Touching in [Loop]'s documentation). The first
// call builds the replayer with the C compiler ($CC, or cc) into the
// user's cache directory (os.UserCacheDir()/carve), keyed by the hash of
// its sources, the compiler and the flags; later calls, in any process,
// reuse it. The error wraps ErrNoCompiler when there is none.
func StartReplayer(preload string, touch bool) (*Replayer, error) {
	if err := ReplayerAvailable(); err != nil {
		return nil, err
	}
	bin, err := replayerBinary()
	if err != nil {
		return nil, err
	}
	opsR, opsW, err := pipe(8 + maxOps*opSize)
	if err != nil {
		return nil, fmt.Errorf("libc: %w", err)
	}
	repR, repW, err := pipe(reportSize)
	if err != nil {
		opsR.Close()
		opsW.Close()
		return nil, fmt.Errorf("libc: %w", err)
	}
	cmd := exec.Command(bin)
	if touch {
		cmd.Args = append(cmd.Args, "-t")
	}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "LD_PRELOAD=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	if preload != "" {
		cmd.Env = append(cmd.Env, "LD_PRELOAD="+preload)
	}
	r := &Replayer{cmd: cmd, ops: opsW, rep: repR, stderr: &stderrHead{}}
	cmd.ExtraFiles = []*os.File{opsR, repW} // fds 3 and 4
	cmd.Stderr = r.stderr
	err = cmd.Start()
	opsR.Close()
	repW.Close()
	if err != nil {
		opsW.Close()
		repR.Close()
		return nil, fmt.Errorf("libc: starting the C replayer: %w", err)
	}
	if err := r.hello(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// hello reads the replayer's first message: who serves it, and its
// baseline.
func (r *Replayer) hello() error {
	var b [helloSize]byte
	if _, err := io.ReadFull(r.rep, b[:]); err != nil {
		return r.died("starting", err)
	}
	u32 := func(off int) uint32 { return binary.NativeEndian.Uint32(b[off:]) }
	i64 := func(off int) int64 { return int64(binary.NativeEndian.Uint64(b[off:])) }
	str := func(off, n int) string { return string(bytes.TrimRight(b[off:off+n], "\x00")) }
	if u32(0) != replayerMagic || u32(4) != replayerProtocol || u32(8) != helloSize || u32(12) != reportSize || i64(56) <= 0 {
		return fmt.Errorf("libc: the C replayer speaks another protocol (magic %#x, protocol %d, sizes %d and %d, page %d; want %#x, %d, %d and %d)",
			u32(0), u32(4), u32(8), u32(12), i64(56), replayerMagic, replayerProtocol, helloSize, reportSize)
	}
	kind := mallocKind(int32(u32(16)))
	if kind < 0 || int(kind) >= len(sources) {
		kind = unknownMalloc
	}
	r.kind = kind
	r.id = Identity{Name: kind.String(), Version: str(64, 96), Library: str(160, 256)}
	if u32(20) == 1 {
		r.start.Heap = HeapStats{Footprint: i64(24), Allocated: i64(32), Source: sources[kind]}
	} else {
		r.start.HeapErr = fmt.Errorf("%w: %s: %s", ErrNoStats, kind, str(416, 128))
	}
	r.start.AnonRSS, r.start.RSS, r.page = i64(40), i64(48), i64(56)
	return nil
}

// Identity returns the malloc that serves the replayer, as its probe
// found it (see Active).
func (r *Replayer) Identity() Identity { return r.id }

// Startup returns what the replayer measured at its baseline.
func (r *Replayer) Startup() Startup { return r.start }

// Pid returns the replayer's process ID, for a caller watching its
// memory.
func (r *Replayer) Pid() int { return r.cmd.Process.Pid }

// Run performs ops in order in the replayer and returns its report after
// them: Done, the sum of the pieces' Nanos and the largest of their
// PeakRSS when Run split ops into pieces of 4096, the other figures of
// the last. Run(nil) performs nothing and reports. A failed op stops Run
// with an error naming its index within ops and wrapping what Loop.Run's
// would (ErrNoMemory, ErrInvalid); that op had no effect and the
// replayer stays usable. An error wrapping ErrClosed reports a replayer
// closed, one that exited (the error says how, with the first line of
// its standard error) or whose pipes broke.
func (r *Replayer) Run(ops []Op) (Report, error) {
	if r == nil || r.done {
		return Report{}, ErrClosed
	}
	var rep Report
	for {
		piece := ops[:min(len(ops), maxOps)]
		got, err := r.batch(piece, rep.Done)
		got.Done += rep.Done
		got.Nanos += rep.Nanos
		got.OffCPU += rep.OffCPU
		got.PeakRSS = max(got.PeakRSS, rep.PeakRSS)
		rep = got
		if ops = ops[len(piece):]; err != nil || len(ops) == 0 {
			return rep, err
		}
	}
}

// batch sends one piece, whose first op is op base of Run's, and reads
// its report.
func (r *Replayer) batch(ops []Op, base int) (Report, error) {
	var head [8]byte
	binary.NativeEndian.PutUint32(head[:], uint32(len(ops)))
	if _, err := r.ops.Write(head[:]); err != nil {
		return Report{}, r.died("sending a batch", err)
	}
	if _, err := r.ops.Write(opBytes(ops)); err != nil {
		return Report{}, r.died("sending a batch", err)
	}
	if _, err := io.ReadFull(r.rep, r.in[:]); err != nil {
		return Report{}, r.died("reading a report", err)
	}
	in := r.in[:]
	i64 := func(off int) int64 { return int64(binary.NativeEndian.Uint64(in[off:])) }
	status, errno := int(int32(binary.NativeEndian.Uint32(in[0:]))), syscall.Errno(binary.NativeEndian.Uint32(in[4:]))
	rep := Report{
		Done:       int(i64(8)),
		Nanos:      i64(16),
		OffCPU:     i64(72),
		AnonRSS:    i64(40),
		PeakRSS:    i64(48),
		TableBytes: (i64(56) + r.page - 1) / r.page * r.page,
	}
	if binary.NativeEndian.Uint32(in[64:]) == 1 {
		rep.Heap = HeapStats{Footprint: i64(24), Allocated: i64(32), Source: sources[r.kind]}
	} else if rep.HeapErr = r.start.HeapErr; rep.HeapErr == nil {
		rep.HeapErr = fmt.Errorf("%w: %s: the statistic could not be read after a batch", ErrNoStats, r.kind)
	}
	switch {
	case status == runOK && rep.Done == len(ops):
		return rep, nil
	case status == runOK || rep.Done < 0 || rep.Done >= len(ops):
		return rep, fmt.Errorf("libc: the C replayer reports %d ops of %d done, status %d", rep.Done, len(ops), status)
	}
	var err error
	if errno != 0 {
		err = errno
	}
	return rep, opError(base+rep.Done, ops[rep.Done], status, err)
}

// Close ends the replayer (it exits when its batches' pipe closes) and
// waits for it. It returns an error if the replayer failed; closing
// twice does nothing.
func (r *Replayer) Close() error {
	if r == nil || r.done {
		return nil
	}
	r.done = true
	r.ops.Close()
	err := r.cmd.Wait()
	r.rep.Close()
	if err != nil {
		return fmt.Errorf("libc: the C replayer: %s", r.failure(err))
	}
	return nil
}

// died returns the error of a replayer whose pipe failed while doing
// what: it waits for the process and says how it ended.
func (r *Replayer) died(what string, ioErr error) error {
	if !r.done {
		r.done = true
		r.ops.Close()
		r.rep.Close()
		if err := r.cmd.Wait(); err != nil {
			return fmt.Errorf("%w: the C replayer ended while %s: %s", ErrClosed, what, r.failure(err))
		}
	}
	return fmt.Errorf("%w: the C replayer, %s: %v", ErrClosed, what, ioErr)
}

// failure says in a line how the replayer ended: the first line of its
// standard error, and its exit status.
func (r *Replayer) failure(err error) string {
	msg := strings.TrimSpace(r.stderr.String())
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = strings.TrimSpace(msg[:i]) + " (and more on its standard error)"
	}
	if msg == "" {
		return err.Error()
	}
	return msg + "; " + err.Error()
}

// opBytes views ops as the bytes the replayer reads: Op's layout is the
// C struct's, in the machine's byte order (op.go and cgo.go assert it),
// and holds no pointer, so its bytes can be written as they are, with no
// copy into a buffer of their encoding.
func opBytes(ops []Op) []byte {
	if len(ops) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(ops))), len(ops)*opSize)
}

// stderrHead keeps the first 4 KiB written to it: the start of a
// replayer's standard error, whose first line says why it failed.
type stderrHead struct {
	mu sync.Mutex
	b  []byte
}

func (t *stderrHead) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p[:min(len(p), max(4096-len(t.b), 0))]...)
	return len(p), nil
}

func (t *stderrHead) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
