package libc

import (
	"fmt"
	"os"
	"time"
	"unsafe"
)

// Loop performs batches of allocation ops on the process's malloc, one C
// call per batch: the replay loop of the C allocators, here in this
// process (a [Replayer] runs the same loop, loop.c, in a C process of its
// own).
//
// # Slots
//
// A Loop keeps a table in C memory, slot -> (block, requested size). An
// [Op] names its block by slot; the caller assigns slots as dense small
// integers and reuses those of freed blocks. The table is mapped with mmap,
// never taken from malloc, so the allocator under test serves the trace's
// requests and nothing else. It costs 16 bytes per slot up to the highest
// slot used, doubles (by mremap) when an allocation or a realloc names a
// slot past its end, and never shrinks; [Loop.TableBytes] says how much
// of it may be resident, for a caller that subtracts it from RSS.
//
// # Touching
//
// A program writes the memory it allocates, and only written pages are
// resident. With touch set, the loop writes every new byte of a block: the
// whole block for malloc and memalign (with the nonzero byte 0xA5), the
// grown tail for realloc, the whole block with zeros for calloc (it keeps
// reading as zero). RSS then measures the pages as it would in the
// program. Without touch, the loop writes only the first byte of each new
// non-empty block: one store. Elapsed counts neither: it is the time
// inside the allocator's calls.
//
// # Failure
//
// Run stops at the first op that fails and reports its index. That op had
// no effect (a realloc that failed leaves the old block in its slot), so
// the loop stays usable: the caller may go on with the ops after it.
//
// # Cost
//
// One cgo call per Run, then per op a table lookup and the C call it
// makes; the table grows by doubling. Close frees every live block, one
// free each. On the shipped systemui trace (770,279 ops, 60,097 slots,
// a 0.92 MiB table), replayed on glibc in batches of 4096 by a thread bound
// to one CPU, the loop takes 90 ns per op where a plain C loop over the
// same array takes 21 (BenchmarkLoop, three runs, at a load of 0.3):
// timing each call, two readings of the monotonic clock (about 35 ns each
// on a KVM guest) and a thread-CPU checkpoint at most every 32 µs, costs
// more than glibc's malloc and free themselves. The calls' time it reports
// is the plain loop's: 21.6 to 31.8 ns per op over the same runs (the
// replayer's C-ns/event). Close of the 53,645 blocks left live takes
// 4.5 ms.
//
// A Loop is not safe for concurrent use. Get one from [NewLoop] (the zero
// Loop is a closed one), and do not copy it.
type Loop struct {
	s loopState // the C state: the table, the counters, the touch flag
}

// NewLoop returns a Loop with an empty table, writing every byte of new
// blocks when touch is set (see Touching in the type's documentation). The
// error wraps ErrNoMemory if the table cannot be mapped, ErrUnavailable
// without cgo.
func NewLoop(touch bool) (*Loop, error) {
	if !available {
		return nil, ErrUnavailable
	}
	l := new(Loop)
	if err := l.s.init(touch); err != nil {
		return nil, fmt.Errorf("%w: mapping the slot table: %v", ErrNoMemory, err)
	}
	return l, nil
}

// Run performs ops in order, in one C call, and returns how many it
// completed: len(ops), or the index of the op that failed with an error
// naming that index (within ops), the op, and what failed. The error wraps
// ErrNoMemory when the allocator returned NULL for a non-zero size (or the
// table could not grow), ErrInvalid for an op that was not sent to it (an
// unknown Kind, a memalign alignment that is not a power of two, an
// allocation into a slot that holds a block), ErrClosed after Close.
//
// C reads ops in place and keeps no reference to it once Run returns.
func (l *Loop) Run(ops []Op) (done int, err error) {
	if l == nil || l.s.closed() {
		return 0, ErrClosed
	}
	if len(ops) == 0 {
		return 0, nil
	}
	done, status, errno := l.s.run(ops)
	if status != runOK {
		return done, opError(done, ops[done], status, errno)
	}
	return done, nil
}

// What loopState.run reports: carve_libc_run's results.
const (
	runOK       = iota
	runNoMemory // the allocator returned NULL
	runKind     // unknown op kind
	runAlign    // alignment not a power of two
	runInUse    // allocation into a slot that holds a block
	runTable    // the table could not grow
)

// opError describes the failure of op, the i-th of its batch.
func opError(i int, op Op, status int, errno error) error {
	name := kindName(op.Kind)
	switch status {
	case runNoMemory:
		return fmt.Errorf("%w: op %d: %s of %d bytes into slot %d", ErrNoMemory, i, name, op.Size, op.Slot)
	case runTable:
		return fmt.Errorf("%w: op %d: growing the slot table to slot %d: %v", ErrNoMemory, i, op.Slot, errno)
	case runKind:
		return fmt.Errorf("%w: op %d: unknown kind %d", ErrInvalid, i, op.Kind)
	case runAlign:
		return fmt.Errorf("%w: op %d: memalign alignment %d is not a power of two", ErrInvalid, i, op.Align)
	case runInUse:
		return fmt.Errorf("%w: op %d: %s into slot %d, which holds a block", ErrInvalid, i, name, op.Slot)
	}
	return fmt.Errorf("libc: op %d: %s failed with status %d", i, name, status)
}

// Block returns the block slot holds and its requested size; ok is false
// when the slot holds none (never filled, freed, or given a NULL by
// malloc(0)) and after Close. The block is C memory: its bytes may be
// read and written through p up to UsableSize(p), until the op that frees
// or reallocates it. Block makes no C call.
func (l *Loop) Block(slot uint32) (p unsafe.Pointer, size int, ok bool) {
	if l == nil || l.s.closed() {
		return nil, 0, false
	}
	p, n := l.s.block(slot)
	return p, int(n), p != nil
}

// Elapsed returns the time spent inside the allocator's calls since
// NewLoop: each call timed in C with the monotonic clock, the system calls
// and page faults it makes included, the cost of the clock's readings and
// the time the thread was off the CPU in it taken off, as package
// replay's Run times carve's (see replay.CheckAfter); not the loop's
// bookkeeping, its writes with touch, the cgo transitions or anything done
// in Go.
func (l *Loop) Elapsed() time.Duration {
	if l == nil {
		return 0
	}
	return time.Duration(l.s.elapsed())
}

// OffCPU returns the time taken off Elapsed since NewLoop as the thread
// was off the CPU in a call: preempted or blocked.
func (l *Loop) OffCPU() time.Duration {
	if l == nil {
		return 0
	}
	return time.Duration(l.s.offCPU())
}

// TableBytes returns the bytes of the slot table that slots have used,
// rounded up to whole pages: at most what the table adds to the process's
// RSS, beyond what the allocator holds.
func (l *Loop) TableBytes() int64 {
	if l == nil || l.s.closed() {
		return 0
	}
	ps := int64(os.Getpagesize())
	return (l.s.tableBytes() + ps - 1) / ps * ps
}

// Close frees every block the table still holds and unmaps the table.
// Closing twice does nothing; Run after Close fails with ErrClosed.
func (l *Loop) Close() {
	if l != nil && !l.s.closed() {
		l.s.close()
	}
}
