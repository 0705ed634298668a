package pool

import (
	"fmt"
	"reflect"
	"unsafe"

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
	opts = append(opts[:len(opts):len(opts)], func(c *config) { c.minAlign = t.Align() })
	p, err := New(size, opts...)
	if err != nil {
		return nil, err
	}
	return &Of[T]{p: p}, nil
}

// New hands out a zeroed *T, or an error wrapping ErrExhausted when the
// pool is at its limit.
func (o *Of[T]) New() (*T, error) {
	c, err := o.p.alloc()
	if err != nil {
		return nil, err
	}
	t := (*T)(c) // the chunk holds at least sizeof(T) bytes, aligned for T
	*t = *new(T)
	return t, nil
}

// Free gives t back to the pool; a pointer New did not hand out is refused
// with an error wrapping ErrForeign.
func (o *Of[T]) Free(t *T) error {
	return o.p.free(unsafe.Pointer(t))
}

// Pool returns the untyped pool underneath, for Stats and Trim.
func (o *Of[T]) Pool() *Pool { return o.p }
