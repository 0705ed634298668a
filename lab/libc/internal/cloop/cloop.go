// Package cloop is the yardstick of libc.Loop: the same allocation ops
// performed by a plain C loop, with a plain pointer array for the slots
// and no Go between the first op and the last. BenchmarkLoop in package
// libc runs both over the shipped trace; the cgo call, the slot table and
// the checks that libc.Loop adds must cost little beside this loop. (Test
// files cannot use cgo, so the reference loop lives here.)
//
// The loop makes the calls libc.Loop makes for each op kind, and the same
// writes as a Loop without touch: the first byte of each new non-empty
// block. See package lab for the lab this serves.
package cloop

import (
	"fmt"
	"unsafe"

	"github.com/carvelab/carve/lab/libc"
)

// Plan is a batch of ops checked for the plain loop, which checks
// nothing: every Kind is known, every memalign alignment a power of two
// (or 0), every Slot below the table's size. What Prepare does not check,
// because libc.Loop's callers do not send it either: an allocation into a
// slot that holds a block (the plain loop would leak the block).
type Plan struct {
	ops   []libc.Op
	slots int // 1 + the largest slot
}

// Prepare checks ops and returns them as a Plan (sharing the slice: the
// caller must not change it afterwards). The error names the first op
// with an unknown Kind or a bad alignment, and wraps libc.ErrInvalid.
func Prepare(ops []libc.Op) (*Plan, error) {
	p := &Plan{ops: ops, slots: 1}
	for i, op := range ops {
		switch {
		case op.Kind < libc.OpMalloc || op.Kind > libc.OpFree:
			return nil, fmt.Errorf("%w: op %d: unknown kind %d", libc.ErrInvalid, i, op.Kind)
		case op.Kind == libc.OpMemalign && op.Align&(op.Align-1) != 0:
			return nil, fmt.Errorf("%w: op %d: memalign alignment %d is not a power of two", libc.ErrInvalid, i, op.Align)
		}
		p.slots = max(p.slots, int(op.Slot)+1)
	}
	return p, nil
}

// Run performs the plan's ops in one C call, then frees the blocks still
// live. It returns how many ops completed and, if one did not, an error
// naming it that wraps libc.ErrNoMemory (malloc returned NULL), or
// libc.ErrUnavailable without cgo. The pointer array is mapped and
// unmapped by each Run, outside the allocator under test.
func (p *Plan) Run() (done int, err error) {
	if len(p.ops) == 0 {
		return 0, nil
	}
	done, status := run(p.ops, p.slots)
	switch status {
	case runOK:
		return done, nil
	case runUnavailable:
		return 0, libc.ErrUnavailable
	case runMap:
		return 0, fmt.Errorf("%w: mapping %d slots", libc.ErrNoMemory, p.slots)
	}
	op := p.ops[done]
	return done, fmt.Errorf("%w: op %d: kind %d of %d bytes into slot %d", libc.ErrNoMemory, done, op.Kind, op.Size, op.Slot)
}

// What run reports: carve_cloop_run's results, and runUnavailable.
const (
	runOK          = iota
	runNoMemory    // an op got NULL
	runMap         // the pointer array could not be mapped
	runUnavailable // no cgo
)

// Pairs makes n pairs of malloc(size), a write of the block's first
// byte, and free, in one C loop: the yardstick of an allocator's fast
// path (BenchmarkHeapPair in package libc).
func Pairs(n, size int) error {
	switch pairs(n, size) {
	case runOK:
		return nil
	case runUnavailable:
		return libc.ErrUnavailable
	}
	return fmt.Errorf("%w: malloc(%d)", libc.ErrNoMemory, size)
}

// A Window is a ring of live blocks of the process's malloc, of which
// Run replaces the oldest, one per step, by a block of the next size:
// BenchmarkHeapWindow's C side.
type Window struct {
	ring  unsafe.Pointer // live pointers, in C memory
	live  int
	sizes []int32
	next  int // the step Run makes next
}

// NewWindow returns a window of live blocks, the first of sizes (taken
// in turn, from the first again past the last), each first byte
// written.
func NewWindow(live int, sizes []int32) (*Window, error) {
	if live < 1 || len(sizes) == 0 {
		return nil, fmt.Errorf("cloop: a window of %d blocks of %d sizes", live, len(sizes))
	}
	ring, err := newRing(live)
	if err != nil {
		return nil, err
	}
	w := &Window{ring: ring, live: live, sizes: sizes}
	if err := w.Run(live); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// Run makes n steps: each frees the oldest block and allocates one of
// the next size in its place.
func (w *Window) Run(n int) error {
	switch w.run(w.next, n) {
	case runOK:
		w.next += n
		return nil
	case runUnavailable:
		return libc.ErrUnavailable
	}
	return fmt.Errorf("%w: a window's block", libc.ErrNoMemory)
}

// Close frees the window's blocks.
func (w *Window) Close() {
	if w.ring != nil {
		freeRing(w.ring, w.live)
		w.ring = nil
	}
}
