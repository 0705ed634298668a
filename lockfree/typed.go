package lockfree

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/carvelab/carve/internal/slabs"
	"github.com/carvelab/carve/internal/typecheck"
)

// Of is a typed handle on a pool whose chunks hold one T each: New hands
// out a zeroed *T and Free takes it back, from any goroutine. Build it
// once with [NewOf]; the check that T may live in carve memory happens
// then, so New and Free cost what Alloc and Free cost, plus clearing T.
//
// T must hold no Go pointers (no pointers, strings, slices, maps, channels,
// functions or interfaces, at any depth): the garbage collector does not
// look inside carve memory, so what such a field pointed to could be freed
// while the chunk still refers to it. NewOf refuses such a T and names the
// field. Store indices or offsets instead, or keep the object in Go memory.
//
// The handle keeps its free chunks zeroed: Free clears the T, so New need
// not (the pool never writes into a free chunk, and fresh memory is zero;
// checked builds, which poison freed chunks, clear them in New instead).
type Of[T any] struct {
	p *Pool
}

// NewOf returns a typed handle on a new pool of T-sized chunks (at least
// one byte) aligned to T's alignment, or more if opts ask for it (the
// default alignment, 8, applies as for New).
func NewOf[T any](opts ...Option) (*Of[T], error) {
	t := reflect.TypeFor[T]()
	if err := typecheck.PointerFree(t); err != nil {
		return nil, fmt.Errorf("lockfree.NewOf[%s]: %w", t, err)
	}
	size := max(int(t.Size()), 1)
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
func (o *Of[T]) New() (*T, error) {
	c, err := o.p.allocVia(allocSlow)
	if checked && err == nil {
		clear(o.p.bytes(o.p.mustIndex(c)))
	}
	return (*T)(c), err
}

// Free clears *t and gives it back to the pool; a pointer New did not
// hand out is refused with an error wrapping ErrForeign, and its memory is
// left alone.
func (o *Of[T]) Free(t *T) error {
	p, c := o.p, unsafe.Pointer(t)
	i, ok := p.indexOf(c)
	if !ok {
		return p.foreignError(c)
	}
	if checked {
		return p.freeChecked(i, c)
	}
	typecheck.Clear(t)
	p.push(i)
	return nil
}

// Pool returns the untyped pool underneath, for Stats and Close.
// Allocate and free the handle's chunks through the handle and its caches
// only: New relies on Free having cleared them.
func (o *Of[T]) Pool() *Pool { return o.p }

// NewCache returns an empty typed cache for one goroutine: a [Cache] that
// hands out *T. The contract of Cache applies.
func (o *Of[T]) NewCache() *CacheOf[T] {
	c := new(CacheOf[T])
	c.c.init(o.p)
	return c
}

// CacheOf is a [Cache] of a typed handle's chunks: New hands out a zeroed
// *T, Free clears it and keeps it for the next New. It belongs to one
// goroutine, as a Cache does.
type CacheOf[T any] struct {
	c Cache
}

// New hands out a zeroed *T, or an error wrapping ErrExhausted when the
// pool has nothing to give.
func (c *CacheOf[T]) New() (*T, error) {
	ptr, err := c.c.newVia(cacheAllocSlow)
	if checked && err == nil {
		p := c.c.p
		clear(p.bytes(p.mustIndex(ptr)))
	}
	return (*T)(ptr), err
}

// Free clears *t and keeps it for the next New; a pointer the handle did
// not hand out is refused with an error wrapping ErrForeign.
func (c *CacheOf[T]) Free(t *T) error {
	if _, ok := c.c.p.indexOf(unsafe.Pointer(t)); ok && !checked {
		typecheck.Clear(t)
	}
	return c.c.freeVia(unsafe.Pointer(t), cacheFreeSlow)
}

// Flush gives every chunk the cache holds back to the pool.
func (c *CacheOf[T]) Flush() error { return c.c.Flush() }

// Len returns how many free chunks the cache holds.
func (c *CacheOf[T]) Len() int { return c.c.Len() }

// mustIndex returns the index of chunk c, which the pool handed out.
func (p *Pool) mustIndex(c unsafe.Pointer) index {
	i, _ := p.indexOf(c)
	return i
}
