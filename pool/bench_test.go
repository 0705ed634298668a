package pool_test

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/carvelab/carve/pool"
)

var sink []byte

// sketch is the block-allocator article's PoolAllocator as bare as Go
// allows: a free list of offsets threaded through the chunks, nothing
// checked.
type sketch struct {
	head uintptr
	base unsafe.Pointer
}

const noLink = ^uintptr(0)

func (s *sketch) alloc() unsafe.Pointer {
	if s.head == noLink {
		return nil
	}
	c := unsafe.Add(s.base, s.head)
	s.head = *(*uintptr)(c)
	return c
}

func (s *sketch) free(c unsafe.Pointer) {
	*(*uintptr)(c) = s.head
	s.head = uintptr(c) - uintptr(s.base)
}

// BenchmarkPair compares one allocate+free pair of a 64-byte chunk: carve's
// pool (free-list pop and push, with the always-on check that the freed
// slice is a chunk of the pool), the typed handle (which also zeroes the
// value), a bare sketch of the block-allocator article's design (the
// floor), sync.Pool Get and Put, and the Go heap (make, with the garbage
// collector's share of the cost). Run them side by side and compare the
// ratios, not the absolute times:
//
//	go test -run '^$' -bench Pair -count 10 ./pool | benchstat -col /impl -
//
// The loops count to b.N rather than use b.Loop, whose guarantee that
// results stay live spills them to the stack on every iteration: a few
// stores that cost each side the same and blur the ratio.
func BenchmarkPair(b *testing.B) {
	const size = 64
	b.Run("impl=pool", func(b *testing.B) {
		p, err := pool.New(size)
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		b.ResetTimer()
		for range b.N {
			c, err := p.Alloc()
			if err != nil {
				b.Fatal(err)
			}
			c[0] = 1
			if err := p.Free(c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=typed", func(b *testing.B) {
		o, err := pool.NewOf[[size]byte]()
		if err != nil {
			b.Fatal(err)
		}
		defer o.Pool().Close()
		b.ResetTimer()
		for range b.N {
			c, err := o.New()
			if err != nil {
				b.Fatal(err)
			}
			c[0] = 1
			if err := o.Free(c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=sketch", func(b *testing.B) {
		// The article's pool with nothing else: no checks, no errors, no
		// growth. The floor for a free list threaded through the chunks.
		region := make([]uint64, size/8*4)
		s := &sketch{base: unsafe.Pointer(&region[0]), head: 0}
		region[0] = uint64(noLink)
		for range b.N {
			c := s.alloc()
			if c == nil {
				b.Fatal("sketch exhausted")
			}
			*(*byte)(c) = 1
			s.free(c)
		}
	})
	b.Run("impl=syncpool", func(b *testing.B) {
		sp := sync.Pool{New: func() any { return new([size]byte) }}
		for range b.N {
			c := sp.Get().(*[size]byte)
			c[0] = 1
			sp.Put(c)
		}
	})
	b.Run("impl=make", func(b *testing.B) {
		for range b.N {
			c := make([]byte, size)
			c[0] = 1
			sink = c
		}
	})
}
