package heap_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/carvelab/carve/heap"
	"github.com/carvelab/carve/internal/heaptest"
)

// newShared returns a Shared heap with opts, closed at the end of the test.
func newShared(t testing.TB, opts ...heap.Option) *heap.Shared {
	t.Helper()
	s, err := heap.NewShared(opts...)
	if err != nil {
		t.Fatalf("NewShared() = %v, want nil", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestSharedGoroutines runs goroutines that each keep a window of blocks
// of log-uniform sizes from 1 B to 12 KiB and replace one per step; a
// quarter of the blocks they let go are freed by the next goroutine, which
// receives them on a channel and checks their bytes first. At the end
// every block still held has its bytes, the shards' invariants hold, and
// Live is what the goroutines hold. Run it with -race, and with -race
// -tags carvegomem, where the detector sees the blocks' bytes too.
func TestSharedGoroutines(t *testing.T) {
	const goroutines, window, steps = 4, 128, 6000
	s := newShared(t, heap.Shards(3), heap.Limit(256<<20))
	type handed struct {
		b  []byte
		id int
	}
	inbox := make([]chan handed, goroutines)
	for g := range inbox {
		inbox[g] = make(chan handed, steps)
	}
	held := make([][]handed, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			sizes := heaptest.LogUniform(steps, 1, 12<<10, uint64(g))
			var mine []handed
			for i, size := range sizes {
				b, err := s.Alloc(size, 1<<(i%4))
				if err != nil {
					t.Errorf("goroutine %d: Alloc(%d) = %v", g, size, err)
					return
				}
				id := g*steps + i
				heaptest.Fill(b, id)
				mine = append(mine, handed{b, id})
				if len(mine) > window {
					j := r.IntN(len(mine))
					x := mine[j]
					mine[j] = mine[len(mine)-1]
					mine = mine[:len(mine)-1]
					if i%4 == 0 {
						inbox[(g+1)%goroutines] <- x
					} else if err := s.Free(x.b); err != nil {
						t.Errorf("goroutine %d: Free = %v", g, err)
						return
					}
				}
				select {
				case x := <-inbox[g]:
					if k := heaptest.Intact(x.b, x.id); k >= 0 {
						t.Errorf("goroutine %d: a block of %d bytes from another goroutine lost byte %d", g, len(x.b), k)
						return
					}
					if err := s.Free(x.b); err != nil {
						t.Errorf("goroutine %d: Free of another goroutine's block = %v", g, err)
						return
					}
				default:
				}
			}
			held[g] = mine
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var live int64
	for g := range goroutines {
		close(inbox[g])
		for x := range inbox[g] {
			held[g] = append(held[g], x)
		}
		for _, x := range held[g] {
			if k := heaptest.Intact(x.b, x.id); k >= 0 {
				t.Fatalf("a block of %d bytes lost byte %d", len(x.b), k)
			}
			live += int64(len(x.b))
		}
	}
	heaptest.MustCheck(t, s, "the goroutines")
	if st := s.Stats(); st.Live != live || st.Footprint > s.Limit() || st.Footprint != s.Footprint() {
		t.Fatalf("Stats() = Live %d, Footprint %d (Footprint() %d); the goroutines hold %d, Limit %d", st.Live, st.Footprint, s.Footprint(), live, s.Limit())
	}
	for g := range held {
		for _, x := range held[g] {
			if err := s.Free(x.b); err != nil {
				t.Fatal(err)
			}
		}
	}
	if st := s.Stats(); st.Live != 0 || st.Slots != 0 || st.Blocks != 0 {
		t.Fatalf("Stats() after freeing everything = %+v, want nothing in use", st.Stats)
	}
	if n, err := s.Trim(); err != nil || heap.CanPurge() && s.Footprint() != 0 {
		t.Fatalf("Trim() = %d, %v, then Footprint() = %d, want nil and 0", n, err, s.Footprint())
	}
}

// TestSharedRefuses checks that a Shared heap refuses what a Heap refuses,
// with the same errors, and changes nothing.
func TestSharedRefuses(t *testing.T) {
	s := newShared(t, heap.Shards(2), heap.Limit(64<<20))
	slot, err := s.Alloc(100, 1)
	if err != nil {
		t.Fatal(err)
	}
	block, err := s.Alloc(5000, 1)
	if err != nil {
		t.Fatal(err)
	}
	freed, _ := s.Alloc(48, 1)
	s.Free(freed)
	before := s.Stats()
	for _, c := range []struct {
		name string
		b    []byte
		want error
	}{
		{"nil", nil, heap.ErrForeign},
		{"Go memory", make([]byte, 64), heap.ErrForeign},
		{"inside a slot", slot[1:], heap.ErrForeign},
		{"inside a block", block[16:], heap.ErrForeign},
		{"a freed slot", freed, heap.ErrDoubleFree},
	} {
		if err := s.Free(c.b); !errors.Is(err, c.want) {
			t.Errorf("Free(%s) = %v, want %v", c.name, err, c.want)
		}
		if _, err := s.Realloc(c.b, 10); !errors.Is(err, c.want) {
			t.Errorf("Realloc(%s) = %v, want %v", c.name, err, c.want)
		}
		if _, err := s.UsableSize(c.b); !errors.Is(err, c.want) {
			t.Errorf("UsableSize(%s) = %v, want %v", c.name, err, c.want)
		}
	}
	for _, c := range []struct {
		size, align int
		want        error
	}{{-1, 1, heap.ErrSize}, {8, 3, heap.ErrAlign}, {64 << 20, 1, heap.ErrExhausted}} {
		if b, err := s.Alloc(c.size, c.align); b != nil || !errors.Is(err, c.want) {
			t.Errorf("Alloc(%d, %d) = %v, want nil and %v", c.size, c.align, err, c.want)
		}
	}
	if after := s.Stats(); after.Stats != before.Stats {
		t.Fatalf("Stats() after the refused calls = %+v, want %+v", after.Stats, before.Stats)
	}
	heaptest.MustCheck(t, s, "the refused calls")
	if !s.Contains(slot) || !s.Contains(block) || s.Contains(make([]byte, 8)) {
		t.Errorf("Contains(slot, block, Go memory) = %v, %v, %v; want true, true, false", s.Contains(slot), s.Contains(block), s.Contains(make([]byte, 8)))
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if _, err := s.Alloc(8, 1); !errors.Is(err, heap.ErrClosed) {
		t.Errorf("Alloc after Close = %v, want %v", err, heap.ErrClosed)
	}
	if err := s.Free(slot); !errors.Is(err, heap.ErrClosed) {
		t.Errorf("Free after Close = %v, want %v", err, heap.ErrClosed)
	}
	if err := s.Close(); !errors.Is(err, heap.ErrClosed) || s.Contains(slot) {
		t.Errorf("Close() again = %v, Contains = %v; want %v, false", err, s.Contains(slot), heap.ErrClosed)
	}
	var zero heap.Shared
	if _, err := zero.Alloc(8, 1); !errors.Is(err, heap.ErrClosed) {
		t.Errorf("Alloc of a zero Shared = %v, want %v", err, heap.ErrClosed)
	}
	if err := zero.Free(make([]byte, 8)); !errors.Is(err, heap.ErrClosed) {
		t.Errorf("Free of a zero Shared = %v, want %v", err, heap.ErrClosed)
	}
}

// TestSharedOptions checks the options NewShared and New refuse.
func TestSharedOptions(t *testing.T) {
	for _, c := range []struct {
		name string
		new  func() error
	}{
		{"NewShared(Shards(0))", func() error { _, err := heap.NewShared(heap.Shards(0)); return err }},
		{"NewShared(Shards(MaxShards+1))", func() error { _, err := heap.NewShared(heap.Shards(heap.MaxShards + 1)); return err }},
		{"NewShared(Shards(4), Limit(16 KiB))", func() error { _, err := heap.NewShared(heap.Shards(4), heap.Limit(16<<10)); return err }},
		{"New(Shards(2))", func() error { _, err := heap.New(heap.Shards(2)); return err }},
	} {
		if err := c.new(); !errors.Is(err, heap.ErrOption) {
			t.Errorf("%s = %v, want %v", c.name, err, heap.ErrOption)
		}
	}
	s := newShared(t, heap.Shards(4), heap.Limit(64<<20))
	if s.Shards() != 4 || s.Limit() != 64<<20 {
		t.Fatalf("Shards(), Limit() = %d, %d; want 4, %d", s.Shards(), s.Limit(), 64<<20)
	}
}

// TestSharedSpills fills the goroutine's shard past its share of the
// Limit: Alloc goes on in the other shard, Realloc of a block that cannot
// grow in its full shard moves it there with its bytes, and Alloc fails
// with ErrExhausted once both are full.
func TestSharedSpills(t *testing.T) {
	const limit = 1 << 20
	s := newShared(t, heap.Shards(2), heap.Limit(limit), heap.Retain(0))
	var blocks [][]byte
	for {
		b, err := s.Alloc(30000, 1)
		if errors.Is(err, heap.ErrExhausted) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		heaptest.Fill(b, len(blocks))
		blocks = append(blocks, b)
	}
	if got := int64(len(blocks)) * 30000; got <= limit/2 {
		t.Fatalf("%d bytes allocated before ErrExhausted, want more than a shard's %d", got, limit/2)
	}
	// Free the last three blocks (in the second shard) and grow the first,
	// whose shard is full: it moves.
	for _, b := range blocks[len(blocks)-3:] {
		if err := s.Free(b); err != nil {
			t.Fatal(err)
		}
	}
	blocks = blocks[:len(blocks)-3]
	moved, err := s.Realloc(blocks[0], 60000)
	if err != nil {
		t.Fatalf("Realloc(the first block, 60000) with room in the other shard = %v", err)
	}
	if heaptest.Addr(moved) == heaptest.Addr(blocks[0]) || heaptest.Intact(moved[:30000], 0) >= 0 {
		t.Fatalf("Realloc kept the block in its full shard, or lost its bytes")
	}
	blocks[0] = moved
	heaptest.MustCheck(t, s, "the spills")
	var live int64
	for i, b := range blocks {
		if i > 0 && heaptest.Intact(b, i) >= 0 {
			t.Fatalf("block %d lost its bytes", i)
		}
		live += int64(len(b))
	}
	if st := s.Stats(); st.Live != live || st.Footprint > limit {
		t.Fatalf("Stats() = Live %d, Footprint %d; want %d, at most %d", st.Live, st.Footprint, live, limit)
	}
}

// TestSharedDoubleFreeRace frees each block from two goroutines at once:
// exactly one Free succeeds, the other returns ErrDoubleFree (or, once the
// block's memory went back to a free block whose start moved, ErrForeign),
// and the heap stays whole.
func TestSharedDoubleFreeRace(t *testing.T) {
	s := newShared(t, heap.Shards(2), heap.Limit(64<<20))
	for i := range 500 {
		b, err := s.Alloc(16+i*13%3000, 1)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for g := range 2 {
			wg.Add(1)
			go func() { defer wg.Done(); errs[g] = s.Free(b) }()
		}
		wg.Wait()
		nils := 0
		for _, err := range errs {
			switch {
			case err == nil:
				nils++
			case !errors.Is(err, heap.ErrDoubleFree) && !errors.Is(err, heap.ErrForeign):
				t.Fatalf("Free from two goroutines: %v, want nil and %v", errs, heap.ErrDoubleFree)
			}
		}
		if nils != 1 {
			t.Fatalf("Free from two goroutines = %v, want exactly one nil", errs)
		}
	}
	heaptest.MustCheck(t, s, "the racing frees")
	if st := s.Stats(); st.Live != 0 {
		t.Fatalf("Live = %d after freeing everything", st.Live)
	}
}

// TestSharedClose closes a Shared heap while goroutines allocate and free
// in it (without touching the blocks, which Close takes away): each call
// either runs whole before Close or returns ErrClosed after it.
func TestSharedClose(t *testing.T) {
	s, err := heap.NewShared(heap.Shards(2), heap.Limit(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	started := make(chan struct{}, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				b, err := s.Alloc(8+i%5000, 1)
				if i == 10 {
					started <- struct{}{}
				}
				if errors.Is(err, heap.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("goroutine %d: Alloc = %v, want nil or %v", g, err, heap.ErrClosed)
					return
				}
				if err := s.Free(b); err != nil && !errors.Is(err, heap.ErrClosed) {
					t.Errorf("goroutine %d: Free = %v, want nil or %v", g, err, heap.ErrClosed)
					return
				}
			}
		}()
	}
	for range 4 {
		<-started
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	wg.Wait()
}

// ExampleShared shares one heap between goroutines: each stores values,
// and one frees what another allocated.
func ExampleShared() {
	s, err := heap.NewShared()
	if err != nil {
		panic(err)
	}
	defer s.Close()
	values := make(chan []byte, 4)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := s.Alloc(32, 1)
			if err != nil {
				panic(err)
			}
			copy(v, fmt.Sprintf("value of goroutine %d", g))
			values <- v // the channel orders the write before the reader's read
		}()
	}
	wg.Wait()
	close(values)
	n := 0
	for v := range values {
		n += len(v)
		if err := s.Free(v); err != nil { // another goroutine's block
			panic(err)
		}
	}
	fmt.Println(n, "bytes stored and freed; live now", s.Stats().Live)
	// Output: 128 bytes stored and freed; live now 0
}
