package heap_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/carvelab/carve/heap"
	"github.com/carvelab/carve/internal/heaptest"
)

// lockedHeap is one Heap behind one sync.Mutex: what goroutines that
// share a heap would do without Shared.
type lockedHeap struct {
	mu sync.Mutex
	h  *heap.Heap
}

func (l *lockedHeap) Alloc(size, align int) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.h.Alloc(size, align)
}

func (l *lockedHeap) Free(b []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.h.Free(b)
}

func (l *lockedHeap) Close() error { return l.h.Close() }

// sharedImpls are the heaps BenchmarkSharedWindow compares: Shared, one
// Heap behind a mutex, and the Go heap (make, the GC freeing).
var sharedImpls = []struct {
	name string
	make func() (allocator, error)
}{
	{"shared", func() (allocator, error) { return heap.NewShared() }},
	{"mutex", func() (allocator, error) {
		h, err := heap.New()
		return &lockedHeap{h: h}, err
	}},
	{"make", func() (allocator, error) { return goHeap{}, nil }},
}

// BenchmarkSharedWindow runs GOMAXPROCS goroutines (b.RunParallel), each
// keeping its own window of 256 live blocks of 16 to 4,016 bytes (log-
// uniform) and replacing one per op, writing its first byte. A quarter of
// the blocks a goroutine lets go it hands to the next goroutine through a
// ring of one writer and one reader (a handoff), which frees them (with
// -cpu 1 the next goroutine is itself): a quarter of the frees are of
// another goroutine's blocks. The handoff's cost is in every row, make's
// included. Compare at one and two
// goroutines:
//
//	go test -run '^$' -bench SharedWindow -cpu 1,2 -count 6 ./heap | benchstat -col /impl -
func BenchmarkSharedWindow(b *testing.B) {
	const window = 256
	for _, impl := range sharedImpls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			a, err := impl.make()
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			n := runtime.GOMAXPROCS(0)
			inbox := make([]handoff, n)
			var ids atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				id := int(ids.Add(1)-1) % n
				sizes := heaptest.LogUniform(4096, 16, 4016, uint64(id+1))
				win := make([][]byte, window)
				for i := range win {
					x, err := a.Alloc(sizes[i], 1)
					if err != nil {
						b.Error(err)
						return
					}
					win[i] = x
				}
				next := &inbox[(id+1)%n]
				for i := 0; pb.Next(); i++ {
					j := i * 97 % window
					old := win[j]
					nb, err := a.Alloc(sizes[i%len(sizes)], 1)
					if err != nil {
						b.Error(err)
						return
					}
					nb[0] = byte(i)
					win[j] = nb
					if i%4 == 3 && next.put(old) {
						old = nil
					}
					if old != nil {
						if err := a.Free(old); err != nil {
							b.Error(err)
							return
						}
					}
					if x := inbox[id].get(); x != nil {
						if err := a.Free(x); err != nil {
							b.Error(err)
							return
						}
					}
				}
				for _, x := range win {
					a.Free(x)
				}
			})
			for i := range inbox {
				for x := inbox[i].get(); x != nil; x = inbox[i].get() {
					a.Free(x)
				}
			}
		})
	}
}

// handoff is a ring of blocks one goroutine puts and one other gets: the
// cheapest way to hand blocks across goroutines, so that the benchmark
// measures the heaps and not the handing (a channel's lock, shared by the
// two cores, cost more than the heaps).
type handoff struct {
	buf  [1024][]byte
	head atomic.Uint64 // the next slot get reads; written by the reader
	_    [56]byte
	tail atomic.Uint64 // the next slot put writes; written by the writer
	_    [56]byte
}

// put adds b and reports whether there was room.
func (r *handoff) put(b []byte) bool {
	t := r.tail.Load()
	if t-r.head.Load() == uint64(len(r.buf)) {
		return false
	}
	r.buf[t%uint64(len(r.buf))] = b
	r.tail.Store(t + 1)
	return true
}

// get takes the oldest block, or returns nil.
func (r *handoff) get() []byte {
	h := r.head.Load()
	if h == r.tail.Load() {
		return nil
	}
	i := h % uint64(len(r.buf))
	b := r.buf[i]
	r.buf[i] = nil
	r.head.Store(h + 1)
	return b
}
