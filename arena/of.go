package arena

import (
	"fmt"
	"math"
	"reflect"
	"unsafe"

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
// field, e.g. "conn.Peer.Name is a string".
func NewOf[T any](a *Arena) (Of[T], error) {
	t := reflect.TypeFor[T]()
	if a == nil {
		return Of[T]{}, fmt.Errorf("arena.NewOf[%s]: nil *Arena", t)
	}
	if err := typecheck.PointerFree(t); err != nil {
		return Of[T]{}, fmt.Errorf("arena.NewOf[%s]: %w", t, err)
	}
	var zero T
	return Of[T]{a: a, size: int(unsafe.Sizeof(zero)), align: int(unsafe.Alignof(zero))}, nil
}

// New returns a pointer to a new zeroed T. It fails as [Arena.Alloc] does.
func (o Of[T]) New() (*T, error) {
	p, ok := o.a.tryBump(o.size, o.align)
	if !ok {
		b, err := o.a.allocSlow(o.size, o.align)
		if err != nil {
			return nil, err
		}
		p = unsafe.Pointer(unsafe.SliceData(b))
	}
	// p is the start of sizeof(T) bytes aligned for T, outside the Go
	// heap; T holds no Go pointers (NewOf checked).
	t := (*T)(p)
	var zero T
	*t = zero
	return t, nil
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
