package arena

import (
	"fmt"
	"math"
	"reflect"
	"unsafe"

	"github.com/carvelab/carve/internal/invariants"
	"github.com/carvelab/carve/internal/typecheck"
)

// Of is a typed handle on an arena: it allocates zeroed values of T, at
// T's size and alignment. Build one per type with [NewOf]; the zero Of is
// not usable. An Of is a small value that may be copied; its allocations
// follow the contract of its [Arena] (valid until Reset or Release, not
// safe for concurrent use).
//
// T must hold no Go pointers: no pointers, strings, slices, maps,
// channels, functions or interfaces, in any field or array element at any
// depth. The garbage collector does not look inside arena memory, so a
// pointer stored there would not keep its target alive. NewOf checks this
// once; allocating costs nothing more than [Arena.Alloc] and the zeroing.
type Of[T any] struct {
	a     *Arena
	size  int
	align int
}

// NewOf returns a handle that allocates values of T from a. If T holds Go
// pointers it fails with an error wrapping [ErrPointers] that names the
// field, e.g. "conn.Peer.Name is a string"; if one T is larger than the
// arena's Limit, with an error wrapping [ErrSize].
func NewOf[T any](a *Arena) (Of[T], error) {
	t := reflect.TypeFor[T]()
	if a == nil {
		return Of[T]{}, fmt.Errorf("arena.NewOf[%s]: nil *Arena", t)
	}
	if err := typecheck.PointerFree(t); err != nil {
		return Of[T]{}, fmt.Errorf("arena.NewOf[%s]: %w", t, err)
	}
	// The size comes from reflect: a variable of type T, even unused,
	// would make the compiler reserve room for one.
	if uint64(t.Size()) > uint64(a.limitBytes()) {
		return Of[T]{}, fmt.Errorf("arena.NewOf[%s]: %w: a value of %d bytes exceeds the arena's limit of %d",
			t, ErrSize, t.Size(), a.limitBytes())
	}
	return Of[T]{a: a, size: int(t.Size()), align: t.Align()}, nil
}

// New returns a pointer to a new zeroed T. It fails as [Arena.Alloc] does.
func (o Of[T]) New() (*T, error) {
	p, err := o.a.bumpVia(o.size, o.align, newSlow)
	if err != nil {
		return nil, err
	}
	// p is the start of sizeof(T) bytes aligned for T, outside the Go
	// heap; T holds no Go pointers (NewOf checked).
	t := (*T)(p)
	typecheck.Clear(t)
	return t, nil
}

// bumpVia is New's fast path: a request of a Go type's size, which is a
// multiple of its alignment, from an offset that is already aligned (as it
// stays while one type is allocated) and leaves room in the block. Any
// other case, an empty T included, goes to slow. The slow path comes in as
// a parameter because Go's inliner charges a call to a parameter far less
// than a call to a function; that keeps New small enough to inline into
// the caller, where the parameter is a constant again.
func (a *Arena) bumpVia(size, align int, slow func(*Arena, int, int) (unsafe.Pointer, error)) (unsafe.Pointer, error) {
	off := a.off
	if off&(align-1) != 0 || off+size >= a.end || invariants.Enabled {
		return slow(a, size, align)
	}
	a.off = off + size
	return unsafe.Add(a.base, off), nil // [off, off+size) lies inside the current block
}

// newSlow is New's slow path: Alloc, which handles every case.
func newSlow(a *Arena, size, align int) (unsafe.Pointer, error) {
	b, err := a.Alloc(size, align)
	return unsafe.Pointer(unsafe.SliceData(b)), err
}

// MakeSlice returns a new slice of n zeroed values of T, with
// len == cap == n. It fails with [ErrSize] if n is negative or n values
// of T do not fit in an int, and otherwise as [Arena.Alloc] does.
func (o Of[T]) MakeSlice(n int) ([]T, error) {
	if n < 0 || (o.size > 0 && n > math.MaxInt/o.size) {
		return nil, fmt.Errorf("%w: MakeSlice(%d) of %d-byte values: want 0 to %d values",
			ErrSize, n, o.size, math.MaxInt/max(o.size, 1))
	}
	b, err := o.a.Alloc(n*o.size, o.align)
	if err != nil {
		return nil, err
	}
	clear(b)
	// As in New: n*sizeof(T) bytes aligned for T, and T holds no Go
	// pointers.
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n), nil
}
