package lockfree_test

import (
	"errors"
	"math/bits"
	"sync"
	"testing"
	"unsafe"

	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/lockfree"
)

type point struct {
	X, Y, Z float64
	Tag     [4]byte
}

func TestNewOfRefusesPointers(t *testing.T) {
	type withString struct {
		ID   int
		Name string
	}
	type inner struct{ P *int }
	type nested struct {
		A [2]inner
	}
	for _, tt := range []struct {
		name string
		make func() error
		want string
	}{
		{"string", func() error { _, err := lockfree.NewOf[withString](); return err }, "withString.Name is a string (string)"},
		{"nested pointer", func() error { _, err := lockfree.NewOf[nested](); return err }, "nested.A[0].P is a pointer (*int)"},
		{"slice", func() error { _, err := lockfree.NewOf[[]byte](); return err }, "[]uint8 is a slice ([]uint8)"},
	} {
		err := tt.make()
		if !errors.Is(err, lockfree.ErrPointers) {
			t.Errorf("NewOf[%s]() = %v, want %v", tt.name, err, lockfree.ErrPointers)
			continue
		}
		if got := err.Error(); len(got) < len(tt.want) || got[len(got)-len(tt.want):] != tt.want {
			t.Errorf("NewOf[%s]() = %q, want it to end %q", tt.name, got, tt.want)
		}
	}
}

func TestOf(t *testing.T) {
	o, err := lockfree.NewOf[point](lockfree.Align(32))
	if err != nil {
		t.Fatalf("NewOf[point]() = %v, want nil", err)
	}
	defer o.Pool().Close()
	p := o.Pool()
	if p.ChunkSize() != int(unsafe.Sizeof(point{})) || p.Stride() != 32 {
		t.Fatalf("NewOf[point](Align(32)): ChunkSize %d, Stride %d, want %d, 32", p.ChunkSize(), p.Stride(), unsafe.Sizeof(point{}))
	}
	a, err := o.New()
	if err != nil {
		t.Fatal(err)
	}
	if *a != (point{}) || uintptr(unsafe.Pointer(a))%32 != 0 {
		t.Fatalf("New() = %+v at %p, want zero, 32-aligned", *a, a)
	}
	a.X, a.Tag = 1.5, [4]byte{'a', 'b', 'c', 'd'}
	if err := o.Free(a); err != nil {
		t.Fatalf("Free() = %v, want nil", err)
	}
	b, err := o.New()
	if err != nil || b != a || *b != (point{}) {
		t.Fatalf("New() after Free = %p %+v, %v; want %p again, zeroed", b, *b, err, a)
	}
	if err := o.Free(&point{}); !errors.Is(err, lockfree.ErrForeign) {
		t.Errorf("Free(Go pointer) = %v, want %v", err, lockfree.ErrForeign)
	}

	// Typed caches on several goroutines, freeing into each other's.
	var wg sync.WaitGroup
	ch := make(chan *point, 64)
	for w := range 2 {
		wg.Go(func() {
			c := o.NewCache()
			defer c.Flush()
			for i := range 2000 {
				v, err := c.New()
				if err != nil {
					t.Errorf("cache New() = %v", err)
					return
				}
				if *v != (point{}) {
					t.Errorf("cache New() = %+v, want zero", *v)
					return
				}
				v.X, v.Y = float64(w), float64(i)
				if i%2 == 0 {
					ch <- v // freed by whoever takes it
				} else if err := c.Free(v); err != nil {
					t.Errorf("cache Free() = %v", err)
					return
				}
				select {
				case v := <-ch:
					if err := c.Free(v); err != nil {
						t.Errorf("cache Free(another's) = %v", err)
						return
					}
				default:
				}
			}
		})
	}
	wg.Wait()
	close(ch)
	c := o.NewCache()
	for v := range ch {
		if err := c.Free(v); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Free(&point{}); !errors.Is(err, lockfree.ErrForeign) {
		t.Errorf("cache Free(Go pointer) = %v, want %v", err, lockfree.ErrForeign)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := o.Free(b); err != nil {
		t.Fatal(err)
	}
	heaptest.MustCheck(t, p, "typed caches")
	if st := checkStats(t, p); st.InUse != 0 || st.Cached != 0 {
		t.Fatalf("Stats() after everything went back = %+v, want nothing in use or cached", st)
	}
}

// big is larger than the 64 KiB the compiler keeps a temporary on the
// stack for: zeroing one through a temporary would allocate it on the Go
// heap.
type big [128 << 10]byte

// TestOfBigValue checks that New and Free, on the pool and on a cache,
// clear a T larger than 64 KiB in place, allocating nothing on the Go
// heap. The calls are direct: through a method value the compiler takes
// another path, which hid the allocation.
func TestOfBigValue(t *testing.T) {
	o, err := lockfree.NewOf[big]()
	if err != nil {
		t.Fatalf("NewOf[big] = %v, want nil", err)
	}
	defer o.Pool().Close()
	use := func(v *big, err error) *big {
		if err != nil {
			panic(err)
		}
		if v[0] != 0 || v[len(v)-1] != 0 {
			panic("New handed out a T that is not zero")
		}
		v[0], v[len(v)-1] = 1, 1
		return v
	}
	if n := testing.AllocsPerRun(100, func() {
		if err := o.Free(use(o.New())); err != nil {
			panic(err)
		}
	}); n != 0 {
		t.Errorf("AllocsPerRun(Of.New + Free of a %d-byte T) = %v, want 0", len(big{}), n)
	}
	c := o.NewCache()
	if n := testing.AllocsPerRun(100, func() {
		if err := c.Free(use(c.New())); err != nil {
			panic(err)
		}
	}); n != 0 {
		t.Errorf("AllocsPerRun(CacheOf.New + Free of a %d-byte T) = %v, want 0", len(big{}), n)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestNewOfHuge checks that a type too large for a chunk is refused with
// an error.
func TestNewOfHuge(t *testing.T) {
	if bits.UintSize < 64 {
		t.Skip("1 TiB types need a 64-bit platform")
	}
	if o, err := lockfree.NewOf[[1 << (bits.UintSize - 24)]byte](); o != nil || !errors.Is(err, lockfree.ErrChunkSize) {
		t.Errorf("NewOf[[1 TiB]byte] = %v, %v, want nil, %v", o, err, lockfree.ErrChunkSize)
	}
}

// TestOfClosed checks the typed handle and a typed cache made after the
// pool's Close: New and Free return ErrClosed.
func TestOfClosed(t *testing.T) {
	o, err := lockfree.NewOf[point]()
	if err != nil {
		t.Fatalf("NewOf[point] = %v, want nil", err)
	}
	v, err := o.New()
	if err != nil {
		t.Fatalf("New() = %v, want nil", err)
	}
	if err := o.Pool().Close(); err != nil {
		t.Fatalf("Close() = %v, want nil", err)
	}
	if w, err := o.New(); w != nil || !errors.Is(err, lockfree.ErrClosed) {
		t.Errorf("New() after Close = %p, %v, want nil, %v", w, err, lockfree.ErrClosed)
	}
	if err := o.Free(v); !errors.Is(err, lockfree.ErrClosed) {
		t.Errorf("Free() after Close = %v, want %v", err, lockfree.ErrClosed)
	}
	c := o.NewCache()
	if w, err := c.New(); w != nil || !errors.Is(err, lockfree.ErrClosed) {
		t.Errorf("cache New() after Close = %p, %v, want nil, %v", w, err, lockfree.ErrClosed)
	}
	if err := c.Free(v); !errors.Is(err, lockfree.ErrClosed) {
		t.Errorf("cache Free() after Close = %v, want %v", err, lockfree.ErrClosed)
	}
}
