package pool

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/carvelab/carve/internal/invariants"
	"github.com/carvelab/carve/internal/slabs"
	"github.com/carvelab/carve/internal/typecheck"
)

// Of is a typed handle on a pool whose chunks hold one T each: New hands
// out a zeroed *T and Free takes it back. Build it once with [NewOf]; the
// check that T may live in carve memory happens then, so New and Free cost
// what Alloc and Free cost, plus zeroing T.
//
// T must hold no Go pointers (no pointers, strings, slices, maps, channels,
// functions or interfaces, at any depth): the garbage collector does not
// look inside carve memory, so what such a field pointed to could be freed
// while the chunk still refers to it. NewOf refuses such a T and names the
// field. Store indices or offsets instead, or keep the object in Go memory.
//
// The first LinkSize bytes of a freed *T are overwritten by the free list.
type Of[T any] struct {
	p *Pool
}

// NewOf returns a typed handle on a new pool of T-sized chunks (at least
// LinkSize bytes) aligned to T's alignment, or more if opts ask for it
// (the default alignment, 8, applies as for New).
func NewOf[T any](opts ...Option) (*Of[T], error) {
	t := reflect.TypeFor[T]()
	if err := typecheck.PointerFree(t); err != nil {
		return nil, fmt.Errorf("pool.NewOf[%s]: %w", t, err)
	}
	size := max(int(t.Size()), LinkSize)
	// Chunks must be aligned for T whatever opts ask for.
	opts = append(opts[:len(opts):len(opts)], func(c *slabs.Config) { c.MinAlign = t.Align() })
	p, err := New(size, opts...)
	if err != nil {
		return nil, err
	}
	return &Of[T]{p: p}, nil
}

// New hands out a zeroed *T, or an error wrapping ErrExhausted when the
// pool is at its limit.
//
// The handle keeps its free chunks zeroed: Free clears the T, so New only
// clears the link the free list wrote (fresh chunks from the OS are zero).
// That keeps both small enough to inline into the caller.
func (o *Of[T]) New() (*T, error) {
	c, err := o.p.popCleared(newSlow)
	return (*T)(c), err
}

// Free clears *t and gives it back to the pool; a pointer New did not
// hand out is refused with an error wrapping ErrForeign, and its memory is
// left alone. As with Pool.Free, a release build does not detect a double
// free, which corrupts the pool; checked builds refuse it (ErrDoubleFree)
// before they touch the chunk, and poison the chunk instead of clearing
// it.
func (o *Of[T]) Free(t *T) error {
	p, c := o.p, unsafe.Pointer(t)
	off := uintptr(c) - uintptr(p.base)
	if !p.owns(off) {
		return p.foreignError(c)
	}
	if invariants.Enabled {
		// Check, then poison: New clears the whole chunk in checked builds.
		return p.freeChecked(offset(off))
	}
	clear(unsafe.Slice((*byte)(c), p.size))
	*linkOf(c) = p.head
	p.head = offset(off)
	return nil
}

// popCleared is New's fast path: pop a chunk and clear the link in it.
// The slow path comes in as a parameter for the reason allocVia gives.
func (p *Pool) popCleared(slow func(*Pool) (unsafe.Pointer, error)) (unsafe.Pointer, error) {
	off := p.head
	if off == none || invariants.Enabled {
		return slow(p)
	}
	c := unsafe.Add(p.base, off) // off is a carved chunk: inside the pool's memory
	p.head = *linkOf(c)
	*linkOf(c) = 0
	return c, nil
}

// newSlow is New's slow path: a chunk from allocSlow, cleared as New
// promises. Fresh and revived chunks are zero but for a link; checked
// builds poison free chunks, so they clear all of it.
func newSlow(p *Pool) (unsafe.Pointer, error) {
	c, err := p.allocSlow()
	if err != nil {
		return nil, err
	}
	if invariants.Enabled {
		clear(unsafe.Slice((*byte)(c), p.stride))
	} else {
		*linkOf(c) = 0 // the link revive or Trim's unlink left
	}
	return c, nil
}

// Pool returns the untyped pool underneath, for Stats, Trim and Close.
// Allocate and free the handle's chunks through the handle only: New
// relies on Free having cleared them.
func (o *Of[T]) Pool() *Pool { return o.p }
