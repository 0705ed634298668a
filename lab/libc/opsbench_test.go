package libc_test

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/carvelab/carve/fit"
	"github.com/carvelab/carve/heap"
	"github.com/carvelab/carve/lab/libc"
	"github.com/carvelab/carve/lab/trace"
)

// BenchmarkOps replays traces through carve's heap (heap.New()) and the
// heap meshing (heap.New(heap.Mesh())), the process's malloc (glibc,
// unless LD_PRELOAD says otherwise: the sub-benchmark is named after
// libc.Active) and carve's best fit (fit.New(fit.BestFit)), the lab's
// heap, heap-mesh and best-fit rows, through one harness:
//
//	CARVE_TRACES=DIR taskset -c 1 go test -run '^$' -bench Ops -count 8 ./lab/libc > ops.txt
//	benchstat -col /alloc ops.txt
//
// (-count runs each sub-benchmark its 8 times in a row; on a busy
// machine, 8 runs of -count 1 interleave the allocators better.)
//
// The traces are the shipped aosp-systemui and every trace file in the
// directory $CARVE_TRACES names, if set (files whose format is not
// recognized, a README say, are left out). The sub-benchmarks
// are trace=NAME/alloc=ALLOC, NAME the file's name up to its first dot,
// and ns/op is the time per op of the trace, the frees of the blocks it
// leaves live included.
//
// Each trace is decoded once into an op list (libc.Op, the objects' IDs
// turned into slots) followed by the frees of the blocks it leaves live,
// in slot order, so that every replay starts from an empty heap, and the
// same list is replayed through each. Every new non-empty block gets
// its first byte written (the Loop's behaviour without touch), nothing
// more: the time is the allocator's. Each allocator is warmed by one
// untimed replay first, and runs on a thread bound to one CPU.
//
// What the harness does per op, on each side:
//
//   - The process's malloc goes through libc.Loop, in batches of 4096 ops
//     (one cgo call and two clock reads per batch: a Run of one op took
//     360 ns on a busy 2-core machine, under 0.1 ns per op of a batch).
//     Per op, loop.c switches on the kind, bounds-checks the slot against
//     its table, refuses an allocation into a slot that holds a block,
//     calls malloc, calloc, posix_memalign, realloc or free, checks for
//     NULL, stores the block and its size in the slot's 16-byte entry and
//     writes the first byte of a new block.
//   - carve's heaps go through replayGo, which does the same in Go over a
//     table of the same 16-byte entries (a pointer and a size), the
//     slot's bounds check being Go's index check: a switch, the check of
//     the slot, an interface call (an indirect call, as the call through
//     the PLT to the C library's malloc is), the error check, the entry's
//     store, the first byte. A calloc is an Alloc and a clear of the
//     block, as the lab replays it (calloc clears too, but for fresh
//     memory from the OS).
//
// Both tables live for the whole sub-benchmark (one Loop, one Go slice),
// so neither pays page faults for its table after the warm-up. The
// allocators get what the lab gives them: a malloc asks carve's heaps for
// the event's alignment, or 1 when it asks none (a slot of the heap is
// then 8-aligned, a best-fit block 16), where C's malloc aligns to 16; a
// realloc to 0 bytes frees the block in glibc and keeps a minimal one in
// carve's heaps.
//
// A C allocator inside a Go process is not quite what a C program sees
// (see the Replayer), and the timing is of one thread: this compares the
// allocators' code paths on the same ops, not the programs the traces
// came from. Without cgo the process's malloc cannot be called and its
// sub-benchmark is skipped, as lab/libc's tests skip without cgo; carve's
// still run.
func BenchmarkOps(b *testing.B) {
	traces, err := benchTraces()
	if err != nil {
		b.Fatal(err)
	}
	for _, tr := range traces {
		b.Run("trace="+tr.name, func(b *testing.B) {
			l, err := tr.ops()
			if err != nil {
				b.Fatal(err)
			}
			ops := l.ops
			for _, a := range opsAllocs() {
				b.Run("alloc="+a.name, func(b *testing.B) {
					if a.skip != "" {
						b.Skip(a.skip)
					}
					// Neither allocator is timed while the Go runtime collects
					// and scavenges the decoding's garbage.
					debug.FreeOSMemory()
					pinThread(b)
					run, done, err := a.start(ops, l.slots)
					if err != nil {
						b.Fatal(err)
					}
					defer done()
					if err := run(); err != nil {
						b.Fatal(err)
					}
					for b.Loop() {
						if err := run(); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ops)), "ns/op")
				})
			}
		})
	}
}

// opsTrace is a trace BenchmarkOps replays: its name and its op list.
type opsTrace struct {
	name string
	// ops returns the op list, decoding the trace at the first call only.
	ops func() (opList, error)
}

// benchTraces are BenchmarkOps's traces, listed once for all the runs
// -count asks for, each decoded at its first run only.
var benchTraces = sync.OnceValues(func() ([]opsTrace, error) { return opsTraces(os.Getenv("CARVE_TRACES")) })

// opsTraces returns the shipped aosp-systemui, then the trace files of
// dir (if not "") in name order. A file whose format is not recognized is
// left out; any other error reading dir is returned.
func opsTraces(dir string) ([]opsTrace, error) {
	traces := []opsTrace{{"aosp-systemui", opsOnce(systemui)}}
	if dir == "" {
		return traces, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("CARVE_TRACES: %w", err)
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if !e.Type().IsRegular() {
			continue
		}
		r, err := trace.Open(path)
		if errors.Is(err, trace.ErrDetect) {
			continue // a README beside the traces
		}
		if err != nil {
			return nil, fmt.Errorf("CARVE_TRACES: %w", err)
		}
		r.Close()
		name, _, _ := strings.Cut(e.Name(), ".")
		traces = append(traces, opsTrace{name, opsOnce(func() ([]libc.Op, error) {
			r, err := trace.Open(path)
			if err != nil {
				return nil, err
			}
			defer r.Close()
			ops, err := decode(r)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			return ops, nil
		})})
	}
	return traces, nil
}

// opList is a trace decoded for BenchmarkOps: its ops, the frees of the
// blocks they leave live included, and how many slots they use.
type opList struct {
	ops   []libc.Op
	slots int
}

// opsOnce returns the ops decode gives, with the frees of the blocks they
// leave live in slot order, decoding once.
func opsOnce(decode func() ([]libc.Op, error)) func() (opList, error) {
	return sync.OnceValues(func() (opList, error) {
		ops, err := decode()
		if err != nil {
			return opList{}, err
		}
		frees := freesOfLive(ops)
		slices.SortFunc(frees, func(a, b libc.Op) int { return int(a.Slot) - int(b.Slot) })
		l := opList{ops: append(slices.Clip(ops), frees...)}
		for _, op := range l.ops {
			l.slots = max(l.slots, int(op.Slot)+1)
		}
		return l, nil
	})
}

// opsAlloc is an allocator of BenchmarkOps: start sets it up for ops over
// slots slots and returns a replay of ops, and what to call when done.
type opsAlloc struct {
	name  string
	skip  string // why the allocator cannot run here, or ""
	start func(ops []libc.Op, slots int) (run func() error, done func(), err error)
}

// opsAllocs returns the allocators, carve's heap first.
func opsAllocs() []opsAlloc {
	c := opsAlloc{name: libc.Active().Name, start: startLoop}
	if !libc.Available() {
		c.name, c.skip = "glibc", "built without cgo: the process's malloc cannot be called"
	}
	return []opsAlloc{
		{name: "heap", start: startGo(func() (goHeap, error) { return heap.New() })},
		{name: "heap-mesh", start: startGo(func() (goHeap, error) { return heap.New(heap.Mesh()) })},
		c,
		{name: "best-fit", start: startGo(func() (goHeap, error) { return fit.New(fit.BestFit) })},
	}
}

// loopBatch is how many ops each libc.Loop.Run performs.
const loopBatch = 4096

// startLoop replays through the process's malloc with one libc.Loop,
// whose table, grown by the first replay, serves every replay.
func startLoop(ops []libc.Op, _ int) (func() error, func(), error) {
	l, err := libc.NewLoop(false)
	if err != nil {
		return nil, nil, err
	}
	run := func() error {
		for i := 0; i < len(ops); i += loopBatch {
			if _, err := l.Run(ops[i:min(i+loopBatch, len(ops))]); err != nil {
				return fmt.Errorf("batch at op %d: %w", i, err)
			}
		}
		return nil
	}
	return run, l.Close, nil
}

// goHeap is what replayGo needs of carve's heaps.
type goHeap interface {
	Alloc(size, align int) ([]byte, error)
	Free(b []byte) error
	Realloc(b []byte, size int) ([]byte, error)
	Close() error
}

// startGo replays through a heap newHeap makes, with one table of slots
// entries for every replay.
func startGo(newHeap func() (goHeap, error)) func([]libc.Op, int) (func() error, func(), error) {
	return func(ops []libc.Op, slots int) (func() error, func(), error) {
		h, err := newHeap()
		if err != nil {
			return nil, nil, err
		}
		table := make([]entry, slots)
		return func() error { return replayGo(h, ops, table) }, func() { h.Close() }, nil
	}
}

// entry is a slot of replayGo's table: the block and its requested size,
// 16 bytes, as loop.c's struct carve_libc_slot. The pointer is to the
// heap's memory, outside the Go heap, which the collector ignores.
type entry struct {
	p unsafe.Pointer
	n uint64
}

var _ = [1]int{}[unsafe.Sizeof(entry{})-16]

// block returns the slice the heap handed out: the pointer and the size
// make it again.
func (e *entry) block() []byte { return unsafe.Slice((*byte)(e.p), e.n) }

// first is the byte the first byte of a new block is written with, as
// loop.c's FILL (a calloc's gets 0).
const first = 0xA5

// replayGo performs ops on h over table, one entry per slot, doing per op
// what loop.c's carve_libc_run does (see BenchmarkOps). It stops at the
// first op that fails and returns an error naming it.
func replayGo(h goHeap, ops []libc.Op, table []entry) error {
	for i := range ops {
		op := &ops[i]
		e := &table[op.Slot]
		switch op.Kind {
		case libc.OpMalloc, libc.OpCalloc, libc.OpMemalign:
			if e.p != nil {
				return fmt.Errorf("op %d: allocation into slot %d, which holds a block", i, op.Slot)
			}
			align, fill := max(int(op.Align), 1), byte(first)
			if op.Kind == libc.OpCalloc {
				align, fill = 1, 0
			}
			b, err := h.Alloc(int(op.Size), align)
			if err != nil {
				return fmt.Errorf("op %d: %w", i, err)
			}
			if op.Kind == libc.OpCalloc {
				clear(b)
			}
			if len(b) > 0 {
				b[0] = fill
			}
			*e = entry{unsafe.Pointer(unsafe.SliceData(b)), op.Size}
		case libc.OpRealloc:
			var b []byte
			var err error
			if e.p == nil {
				b, err = h.Alloc(int(op.Size), 1)
			} else {
				b, err = h.Realloc(e.block(), int(op.Size))
			}
			if err != nil {
				return fmt.Errorf("op %d: %w", i, err)
			}
			if e.n == 0 && len(b) > 0 { // a new block, as loop.c sees it
				b[0] = first
			}
			*e = entry{unsafe.Pointer(unsafe.SliceData(b)), op.Size}
		case libc.OpFree:
			if e.p != nil {
				if err := h.Free(e.block()); err != nil {
					return fmt.Errorf("op %d: %w", i, err)
				}
				*e = entry{}
			}
		default:
			return fmt.Errorf("op %d: unknown kind %d", i, op.Kind)
		}
	}
	return nil
}

// model is what a replay of ops must leave in each slot: the requested
// size and the first byte of the block, for the slots that hold one.
type model map[uint32]struct {
	size  uint64
	first byte
}

// modelOf replays ops on the model: an allocation fills its slot, its
// first byte written (0 for a calloc); a realloc keeps the first byte of
// a block that had one and writes it in a block that had none; a free
// empties the slot.
func modelOf(ops []libc.Op) model {
	m := model{}
	for _, op := range ops {
		v, ok := m[op.Slot]
		switch op.Kind {
		case libc.OpMalloc, libc.OpMemalign:
			v.size, v.first = op.Size, first
		case libc.OpCalloc:
			v.size, v.first = op.Size, 0
		case libc.OpRealloc:
			if !ok || v.size == 0 {
				v.first = first
			}
			v.size = op.Size
		case libc.OpFree:
			delete(m, op.Slot)
			continue
		}
		m[op.Slot] = v
	}
	return m
}

// TestReplayGo replays op lists through carve's heaps with replayGo and
// checks the table against the model (and, with cgo, against libc.Loop's
// table after the same ops): the same blocks in the same slots with the
// same sizes and first bytes, the heap's Live their sum; then the frees
// of the blocks left live empty the table and the heap. The lists are
// the start of the shipped trace, and one of each case of the loop.
func TestReplayGo(t *testing.T) {
	all, err := systemui()
	if err != nil {
		t.Fatal(err)
	}
	const n = 20000
	t.Run("aosp-systemui", func(t *testing.T) { testReplayGo(t, all[:n]) })
	t.Run("cases", func(t *testing.T) {
		testReplayGo(t, []libc.Op{
			{Kind: libc.OpCalloc, Slot: 0, Size: 10},
			{Kind: libc.OpRealloc, Slot: 0, Size: 5000}, // keeps the calloc's 0
			{Kind: libc.OpMalloc, Slot: 1, Size: 0},
			{Kind: libc.OpRealloc, Slot: 1, Size: 10}, // a block of 0 bytes grows: its first byte is new
			{Kind: libc.OpRealloc, Slot: 2, Size: 30}, // of an empty slot: a malloc
			{Kind: libc.OpMemalign, Slot: 3, Size: 100, Align: 4096},
			{Kind: libc.OpMalloc, Slot: 4, Size: 300},
			{Kind: libc.OpRealloc, Slot: 4, Size: 20}, // shrinks
			{Kind: libc.OpFree, Slot: 5},              // of an empty slot: nothing
			{Kind: libc.OpMalloc, Slot: 6, Size: 1 << 20},
			{Kind: libc.OpFree, Slot: 6},
			{Kind: libc.OpMalloc, Slot: 6, Size: 17},
		})
	})
}

// testReplayGo is TestReplayGo on the ops of body.
func testReplayGo(t *testing.T, body []libc.Op) {
	l, err := opsOnce(func() ([]libc.Op, error) { return body, nil })()
	if err != nil {
		t.Fatal(err)
	}
	frees := l.ops[len(body):]
	m := modelOf(body)
	if len(m) == 0 || len(frees) != len(m) {
		t.Fatalf("%d blocks live after %d ops, %d frees of them, want some and as many", len(m), len(body), len(frees))
	}
	var liveBytes int64
	for _, v := range m {
		liveBytes += int64(v.size)
	}
	var loop *libc.Loop
	if libc.Available() {
		if loop, err = libc.NewLoop(false); err != nil {
			t.Fatal(err)
		}
		defer loop.Close()
		if _, err := loop.Run(body); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name string
		new  func() (goHeap, func() int64, error)
	}{
		{"heap", func() (goHeap, func() int64, error) {
			h, err := heap.New()
			return h, func() int64 { return h.Stats().Live }, err
		}},
		{"best-fit", func() (goHeap, func() int64, error) {
			h, err := fit.New(fit.BestFit)
			return h, func() int64 { return h.Stats().Live }, err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, live, err := tt.new()
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			table := make([]entry, l.slots)
			if err := replayGo(h, body, table); err != nil {
				t.Fatal(err)
			}
			for slot, e := range table {
				v, ok := m[uint32(slot)]
				switch {
				case ok != (e.p != nil) || e.n != v.size:
					t.Fatalf("slot %d holds %d bytes at %p, want %d bytes (live %v)", slot, e.n, e.p, v.size, ok)
				case ok && e.n > 0 && e.block()[0] != v.first:
					t.Fatalf("slot %d: first byte %#x, want %#x", slot, e.block()[0], v.first)
				}
				if loop == nil {
					continue
				}
				p, n, inC := loop.Block(uint32(slot))
				if inC != ok || uint64(n) != e.n || inC && n > 0 && bytesOf(p, 1)[0] != v.first {
					t.Fatalf("slot %d: libc.Loop holds %d bytes (live %v), replayGo %d bytes (live %v)", slot, n, inC, e.n, ok)
				}
			}
			if got := live(); got != liveBytes {
				t.Errorf("Live after %d ops = %d, want %d", len(body), got, liveBytes)
			}
			if err := replayGo(h, frees, table); err != nil {
				t.Fatal(err)
			}
			if i := slices.IndexFunc(table, func(e entry) bool { return e != entry{} }); i >= 0 {
				t.Errorf("slot %d holds %+v after the frees", i, table[i])
			}
			if got := live(); got != 0 {
				t.Errorf("Live after the frees = %d, want 0", got)
			}
		})
	}
}

// TestReplayGoRefuses: replayGo stops at an op the C loop refuses too, or
// one the heap fails, and names it.
func TestReplayGoRefuses(t *testing.T) {
	for _, tt := range []struct {
		name string
		op   libc.Op
		want string
	}{
		{"slot in use", libc.Op{Kind: libc.OpMalloc, Slot: 0, Size: 8}, "op 1: allocation into slot 0, which holds a block"},
		{"unknown kind", libc.Op{Kind: libc.OpFree + 1, Slot: 1}, "op 1: unknown kind 6"},
		{"no memory", libc.Op{Kind: libc.OpMalloc, Slot: 1, Size: 1 << 62}, "op 1: "},
		{"bad alignment", libc.Op{Kind: libc.OpMemalign, Slot: 1, Size: 8, Align: 48}, "op 1: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, err := heap.New()
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			table := make([]entry, 2)
			err = replayGo(h, []libc.Op{{Kind: libc.OpMalloc, Slot: 0, Size: 8}, tt.op}, table)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("replayGo error = %v, want one starting %q", err, tt.want)
			}
			if table[0].n != 8 || table[1] != (entry{}) {
				t.Errorf("table after the error = %+v, want the first block and an empty slot", table)
			}
			if live := h.Stats().Live; live != 8 {
				t.Errorf("Live = %d, want 8", live)
			}
		})
	}
}

// TestOpsTraces: CARVE_TRACES adds the trace files of its directory, in
// name order, named up to their first dot, and leaves out what is not a
// trace.
func TestOpsTraces(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"zz.trace.gz", "a.trace"} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		var w io.Writer = f
		var z *gzip.Writer
		if strings.HasSuffix(name, ".gz") {
			z = gzip.NewWriter(f)
			w = z
		}
		tw := trace.NewWriter(w)
		for _, e := range []trace.Event{{Op: trace.Alloc, ID: 1, Size: 10}, {Op: trace.Alloc, ID: 2, Size: 20}, {Op: trace.Free, ID: 1}} {
			if err := tw.Write(e); err != nil {
				t.Fatal(err)
			}
		}
		if err := tw.Flush(); err != nil {
			t.Fatal(err)
		}
		if z != nil {
			if err := z.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("# Traces\n\nRecorded on this machine.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	ts, err := opsTraces(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tr := range ts {
		names = append(names, tr.name)
	}
	if got := strings.Join(names, " "); got != "aosp-systemui a zz" {
		t.Fatalf("opsTraces(%s) = %s, want aosp-systemui a zz", dir, got)
	}
	l, err := ts[2].ops()
	want := []libc.Op{{Kind: libc.OpMalloc, Slot: 0, Size: 10}, {Kind: libc.OpMalloc, Slot: 1, Size: 20}, {Kind: libc.OpFree, Slot: 0}, {Kind: libc.OpFree, Slot: 1}}
	if err != nil || !slices.Equal(l.ops, want) || l.slots != 2 {
		t.Errorf("ops of zz = %+v over %d slots, %v; want %+v over 2", l.ops, l.slots, err, want)
	}
	if _, err := opsTraces(filepath.Join(dir, "none")); err == nil {
		t.Error("opsTraces of a missing directory succeeded")
	}
}
