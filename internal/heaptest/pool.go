package heaptest

import "testing"

// Checker is an allocator with an invariant checker, as its package's
// export_test.go exports it.
type Checker interface{ Check() error }

// MustCheck fails the test when c's invariants do not hold after step.
func MustCheck(t testing.TB, c Checker, step string) {
	t.Helper()
	if err := c.Check(); err != nil {
		t.Fatalf("Check() after %s = %v, want nil", step, err)
	}
}

// Pool is a pool of fixed-size chunks, a pool.Pool or a lockfree.Pool,
// whose statistics are of type S.
type Pool[S any] interface {
	Checker
	Alloc() ([]byte, error)
	Free(c []byte) error
	ChunkSize() int
	Stats() S
}

// MustNew returns a pool of chunk-byte chunks made by newPool (the pool
// package's New), checked, and closed when the test ends.
func MustNew[P interface {
	Checker
	Close() error
}, O any](t testing.TB, newPool func(chunk int, opts ...O) (P, error), chunk int, opts ...O) P {
	t.Helper()
	p, err := newPool(chunk, opts...)
	if err != nil {
		t.Fatalf("New(%d) = %v, want nil", chunk, err)
	}
	t.Cleanup(func() { p.Close() })
	MustCheck(t, p, "New")
	return p
}

// MustOver returns a pool of chunk-byte chunks carved from region by over
// (the pool package's Over), checked, and closed when the test ends.
func MustOver[P interface {
	Checker
	Close() error
}, O any](t testing.TB, over func(region []byte, chunk int, opts ...O) (P, error), region []byte, chunk int, opts ...O) P {
	t.Helper()
	p, err := over(region, chunk, opts...)
	if err != nil {
		t.Fatalf("Over(%d bytes, %d) = %v, want nil", len(region), chunk, err)
	}
	t.Cleanup(func() { p.Close() })
	MustCheck(t, p, "Over")
	return p
}

// MustAlloc allocates a chunk from p, which must give one of len == cap
// == ChunkSize, and checks the pool.
func MustAlloc[S any](t testing.TB, p Pool[S]) []byte {
	t.Helper()
	c, err := p.Alloc()
	if err != nil {
		t.Fatalf("Alloc() = %v, want nil (stats %+v)", err, p.Stats())
	}
	if len(c) != p.ChunkSize() || cap(c) != p.ChunkSize() {
		t.Fatalf("Alloc() = len %d cap %d, want both %d", len(c), cap(c), p.ChunkSize())
	}
	MustCheck(t, p, "Alloc")
	return c
}

// MustFree frees chunk c to p, which must take it, and checks the pool.
func MustFree(t testing.TB, p interface {
	Checker
	Free(c []byte) error
}, c []byte) {
	t.Helper()
	if err := p.Free(c); err != nil {
		t.Fatalf("Free(%#x) = %v, want nil", Addr(c), err)
	}
	MustCheck(t, p, "Free")
}
