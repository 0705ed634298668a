package lockfree_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/lockfree"
)

// The block-allocator article's ABA hazard, reproduced deterministically.
// A goroutine T pops: it reads the head A and A's link B, and stalls just
// before its compare-and-swap (a hook that waits on a channel). Meanwhile
// the test pops A, pops B (the test now holds B) and pushes A back, so the
// head is A again. Then T resumes and tries its swap.
//
// A bare compare-and-swap stack (naiveStack below, in this file and not in
// the library) lets the swap succeed and installs B, which the test holds,
// as the head: the next pop hands B out a second time. carve's pool packs
// a version with the head, so T's swap fails, T retries from the real
// head, and the list stays whole.

// naiveStack is the article's lock-free list as written: pop reads the head
// and its link and swaps the head from the one to the other; the head is
// a bare index (plus one; 0 is empty) with no version.
type naiveStack struct {
	head atomic.Uint32
	next []atomic.Uint32 // next[i]: the node after i, plus one
	hook func()          // runs between reading the link and the swap
}

func (s *naiveStack) pop() (int, bool) {
	for {
		h := s.head.Load()
		if h == 0 {
			return 0, false
		}
		next := s.next[h-1].Load()
		if s.hook != nil {
			s.hook()
		}
		if s.head.CompareAndSwap(h, next) {
			return int(h - 1), true
		}
	}
}

func (s *naiveStack) push(i int) {
	for {
		h := s.head.Load()
		s.next[i].Store(h)
		if s.head.CompareAndSwap(h, uint32(i+1)) {
			return
		}
	}
}

// stall returns a hook that stalls the first goroutine to call it until
// resume is closed, after closing stalled; later calls pass through.
func stall() (hook func(), stalled, resume chan struct{}) {
	stalled, resume = make(chan struct{}), make(chan struct{})
	var armed atomic.Bool
	armed.Store(true)
	hook = func() {
		if armed.CompareAndSwap(true, false) {
			close(stalled)
			<-resume
		}
	}
	return hook, stalled, resume
}

// abaStack is what the interleaving needs of a stack of nodes 0, 1, 2.
type abaStack interface {
	pop() (int, bool)
	push(int)
}

// interleave runs the schedule on s, whose list is 0 -> 1 -> 2 and whose
// pops call hook. It returns the node T popped and the nodes the test
// holds (B), logging each step.
func interleave(t *testing.T, s abaStack, stalled, resume chan struct{}) (tGot, held int) {
	t.Helper()
	got := make(chan int)
	go func() {
		i, ok := s.pop()
		if !ok {
			i = -1
		}
		got <- i
	}()
	<-stalled
	t.Logf("T read head A=0 and its link B=1, and stalls before its compare-and-swap")
	a, _ := s.pop()
	b, _ := s.pop()
	s.push(a)
	t.Logf("the test popped A=%d, popped B=%d (and holds it), pushed A back: the head is A again", a, b)
	close(resume)
	tGot = <-got
	t.Logf("T resumed and popped %d", tGot)
	return tGot, b
}

func TestABANaiveStackCorrupts(t *testing.T) {
	s := &naiveStack{next: make([]atomic.Uint32, 3)}
	for _, i := range []int{2, 1, 0} {
		s.push(i)
	}
	hook, stalled, resume := stall()
	s.hook = hook
	tGot, held := interleave(t, s, stalled, resume)
	// T's swap saw head A and succeeded: it installed its stale link, B,
	// which the test holds, as the head.
	if tGot != 0 {
		t.Fatalf("T popped %d, want A=0 (its stale swap succeeds)", tGot)
	}
	next, ok := s.pop()
	if !ok || next != held {
		t.Fatalf("the next pop = %d, %t; want B=%d again: the corruption this test exists to show did not happen", next, ok, held)
	}
	t.Logf("corrupted: the next pop hands out B=%d, which the test already holds: one chunk, two owners", next)
	if last, ok := s.pop(); ok {
		t.Logf("and the pop after that returns %d; the list had three nodes and has handed out four", last)
	}
}

// abaPool adapts the pool's shared Alloc and Free to abaStack over three
// chunks numbered by index.
type abaPool struct {
	t      *testing.T
	p      *lockfree.Pool
	chunks [3][]byte
}

func (a *abaPool) pop() (int, bool) {
	b, err := a.p.Alloc()
	if errors.Is(err, lockfree.ErrExhausted) {
		return 0, false
	}
	if err != nil {
		a.t.Errorf("Alloc() = %v", err)
		return 0, false
	}
	i, _ := a.p.Index(b)
	return int(i), true
}

func (a *abaPool) push(i int) {
	if err := a.p.Free(a.chunks[i]); err != nil {
		a.t.Errorf("Free(chunk %d) = %v", i, err)
	}
}

// newABAPool returns a pool of exactly three chunks, all carved, whose
// free list is 0 -> 1 -> 2.
func newABAPool(t *testing.T) *abaPool {
	a := &abaPool{t: t, p: heaptest.MustOver(t, lockfree.Over, make([]byte, 3*64), 64)}
	for i := range a.chunks {
		a.chunks[i] = heaptest.MustAlloc(t, a.p)
	}
	for _, i := range []int{2, 1, 0} {
		heaptest.MustFree(t, a.p, a.chunks[i])
	}
	return a
}

func TestABAPoolHolds(t *testing.T) {
	a := newABAPool(t)
	hook, stalled, resume := stall()
	a.p.SetPopHook(hook)
	_, v0 := a.p.Head()
	tGot, held := interleave(t, a, stalled, resume)
	_, v1 := a.p.Head()
	t.Logf("the head's version went from %d to %d: T's swap failed and it retried from the real head", v0, v1)
	if tGot != 0 || held != 1 {
		t.Fatalf("T popped %d and the test holds %d, want A=0 and B=1", tGot, held)
	}
	heaptest.MustCheck(t, a.p, "the interleaving")
	next, ok := a.pop()
	if !ok || next != 2 {
		t.Fatalf("the next pop = %d, %t, want C=2, the only free chunk", next, ok)
	}
	if i, ok := a.pop(); ok {
		t.Fatalf("a pop from an empty pool returned %d, want ErrExhausted", i)
	}
	t.Logf("whole: the next pop hands out C=2, then the pool is exhausted; each chunk has one owner")
	if st := checkStats(t, a.p); st.InUse != 3 || st.Free != 0 {
		t.Fatalf("Stats() = InUse %d, Free %d, want 3, 0", st.InUse, st.Free)
	}
}

// TestABACacheRefillHolds runs the interleaving against the multi-chunk
// pop that an empty cache refills with: T's cache walks A -> B -> C and
// stalls before its swap; the test takes A and B and gives A back. T's
// swap fails, and its retry takes only the chunks that are really free.
func TestABACacheRefillHolds(t *testing.T) {
	a := newABAPool(t)
	hook, stalled, resume := stall()
	a.p.SetPopHook(hook)
	c := a.p.NewCache()
	got := make(chan []byte)
	go func() {
		b, err := c.Alloc()
		if err != nil {
			t.Errorf("cache Alloc() = %v", err)
		}
		got <- b
	}()
	<-stalled
	x, _ := a.pop()
	y, _ := a.pop()
	a.push(x)
	close(resume)
	b := <-got
	i, _ := a.p.Index(b)
	t.Logf("T's cache walked A, B, C and stalled; the test took A=%d and B=%d and gave A back; T's cache then handed out %d and holds %d more", x, y, i, c.Len())
	if i == int64(y) || c.Len() != 1 {
		t.Fatalf("cache Alloc() = chunk %d with %d more held, want A or C, one more held, never B=%d", i, c.Len(), y)
	}
	mustCheckCaches(t, a.p, "the interleaving", c)
	if _, ok := a.pop(); ok {
		t.Fatalf("the shared pool handed out a chunk, want none free: the cache holds the other two")
	}
}
