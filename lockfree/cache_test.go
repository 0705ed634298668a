package lockfree_test

import (
	"errors"
	"testing"

	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/lockfree"
)

// mustCheckCaches checks the pool and each cache.
func mustCheckCaches(t testing.TB, p *lockfree.Pool, step string, caches ...*lockfree.Cache) {
	t.Helper()
	heaptest.MustCheck(t, p, step)
	for k, c := range caches {
		if err := c.Check(); err != nil {
			t.Fatalf("cache %d: Check() after %s = %v, want nil", k, step, err)
		}
	}
}

// TestCacheBatches follows chunks between a cache, the depot and the
// shared free list.
func TestCacheBatches(t *testing.T) {
	const n = 200
	p := heaptest.MustOver(t, lockfree.Over, make([]byte, n*64), 64)
	c := p.NewCache()

	// The first Alloc takes a batch, carved.
	first, err := c.Alloc()
	if err != nil {
		t.Fatalf("Alloc() = %v, want nil", err)
	}
	mustCheckCaches(t, p, "first Alloc", c)
	st := checkStats(t, p)
	if c.Len() != lockfree.Batch-1 || st.Carved != lockfree.Batch || st.Cached != lockfree.Batch || st.InUse != 0 {
		t.Fatalf("after the first Alloc: Len() = %d, Stats() = Carved %d, Cached %d, InUse %d; want %d, %d, %d (the cache has not reported its Alloc yet), 0",
			c.Len(), st.Carved, st.Cached, st.InUse, lockfree.Batch-1, lockfree.Batch, lockfree.Batch)
	}
	if err := c.Free(first); err != nil {
		t.Fatalf("Free() = %v, want nil", err)
	}
	if again, _ := c.Alloc(); heaptest.Addr(again) != heaptest.Addr(first) {
		t.Fatalf("Alloc() after Free = %#x, want the chunk freed last %#x", heaptest.Addr(again), heaptest.Addr(first))
	}

	// 100 chunks: four batches.
	held := [][]byte{first}
	for len(held) < 100 {
		b, err := c.Alloc()
		if err != nil {
			t.Fatalf("Alloc() #%d = %v, want nil", len(held), err)
		}
		heaptest.Fill(b, len(held))
		held = append(held, b)
		mustCheckCaches(t, p, "Alloc", c)
	}
	if st := checkStats(t, p); st.Carved != 4*lockfree.Batch || c.Len() != 4*lockfree.Batch-100 {
		t.Fatalf("after 100 Allocs: Carved %d, Len() %d, want %d, %d", st.Carved, c.Len(), 4*lockfree.Batch, 4*lockfree.Batch-100)
	}

	// Freeing them all overflows the cache into the depot a batch at a
	// time.
	for id, b := range held {
		if i := heaptest.Intact(b, id); id > 0 && i >= 0 {
			t.Fatalf("chunk %d lost byte %d", id, i)
		}
		if err := c.Free(b); err != nil {
			t.Fatalf("Free(#%d) = %v, want nil", id, err)
		}
		if c.Len() > 2*lockfree.Batch {
			t.Fatalf("Len() = %d, want at most %d", c.Len(), 2*lockfree.Batch)
		}
		mustCheckCaches(t, p, "Free", c)
	}
	st = checkStats(t, p)
	// The cache reported its count at its last spill, not since: the
	// chunks freed into it after that still count as InUse.
	if st.InUse+st.Cached != int64(c.Len()) || c.Len()+p.DepotLen() != 4*lockfree.Batch || st.Free != int64(p.DepotLen()) {
		t.Fatalf("after freeing all: Stats() = %+v, Len() %d, depot %d; want everything in the cache or the depot, InUse + Cached = Len()", st, c.Len(), p.DepotLen())
	}

	// Flush gives the rest to the depot; the shared Alloc takes a batch
	// from there and puts all but one on the free list.
	if err := c.Flush(); err != nil {
		t.Fatalf("Flush() = %v, want nil", err)
	}
	mustCheckCaches(t, p, "Flush", c)
	if st := checkStats(t, p); c.Len() != 0 || st.Cached != 0 || st.InUse != 0 || p.DepotLen() != 4*lockfree.Batch {
		t.Fatalf("after Flush: Len() %d, Stats() = %+v, depot %d, want all %d chunks in the depot", c.Len(), st, p.DepotLen(), 4*lockfree.Batch)
	}
	shared := heaptest.MustAlloc(t, p)
	if st := checkStats(t, p); st.Carved != 4*lockfree.Batch || st.InUse != 1 || p.DepotLen() != 3*lockfree.Batch {
		t.Fatalf("shared Alloc with an empty free list: Stats() = %+v, depot %d, want a batch moved from the depot, nothing carved", st, p.DepotLen())
	}

	// A chunk from the pool may go back through a cache, and the other
	// way round.
	if err := c.Free(shared); err != nil {
		t.Fatalf("cache Free(chunk of the shared Alloc) = %v, want nil", err)
	}
	b, err := c.Alloc()
	if err != nil || heaptest.Addr(b) != heaptest.Addr(shared) {
		t.Fatalf("cache Alloc() = %#x, %v, want %#x", heaptest.Addr(b), err, heaptest.Addr(shared))
	}
	heaptest.MustFree(t, p, b)
	mustCheckCaches(t, p, "cross frees", c)
}

// TestCacheRefillOrder: an empty cache takes from the depot first, then
// from the shared free list (in one swap), then carves.
func TestCacheRefillOrder(t *testing.T) {
	p := heaptest.MustOver(t, lockfree.Over, make([]byte, 100*64), 64)
	var shared [][]byte
	for range 10 {
		shared = append(shared, heaptest.MustAlloc(t, p))
	}
	for _, b := range shared {
		heaptest.MustFree(t, p, b)
	}
	c := p.NewCache()
	if _, err := c.Alloc(); err != nil {
		t.Fatal(err)
	}
	st := checkStats(t, p)
	if c.Len() != 9 || st.Free != 0 || st.Carved != 10 {
		t.Fatalf("refill from a free list of 10: Len() %d, Stats() = %+v, want all 10 taken in one batch, nothing carved", c.Len(), st)
	}
	c2 := p.NewCache()
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Alloc(); err != nil {
		t.Fatal(err)
	}
	if st := checkStats(t, p); c2.Len() != 8 || p.DepotLen() != 0 || st.Carved != 10 {
		t.Fatalf("refill from a depot of 9: Len() %d, depot %d, Stats() = %+v, want all 9 taken, nothing carved", c2.Len(), p.DepotLen(), st)
	}
	for range 9 {
		if _, err := c2.Alloc(); err != nil {
			t.Fatal(err)
		}
	}
	if st := checkStats(t, p); c2.Len() != lockfree.Batch-1 || st.Carved != 10+lockfree.Batch {
		t.Fatalf("refill with nothing free: Len() %d, Stats() = %+v, want a batch carved", c2.Len(), st)
	}
	mustCheckCaches(t, p, "refills", c, c2)
}

// TestCacheExhausted: chunks a cache holds are not available to others
// until it gives them back.
func TestCacheExhausted(t *testing.T) {
	const n = 40
	p := heaptest.MustOver(t, lockfree.Over, make([]byte, n*64), 64)
	a, b := p.NewCache(), p.NewCache()
	var held [][]byte
	for range n {
		c, err := a.Alloc()
		if err != nil {
			t.Fatalf("Alloc() #%d of %d = %v, want nil", len(held), n, err)
		}
		held = append(held, c)
	}
	for _, c := range []*lockfree.Cache{a, b} {
		if got, err := c.Alloc(); got != nil || !errors.Is(err, lockfree.ErrExhausted) {
			t.Fatalf("Alloc() with every chunk held = %v, want %v", err, lockfree.ErrExhausted)
		}
	}
	if _, err := p.Alloc(); !errors.Is(err, lockfree.ErrExhausted) {
		t.Fatalf("shared Alloc() with every chunk held = %v, want %v", err, lockfree.ErrExhausted)
	}
	if err := a.Free(held[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Alloc(); !errors.Is(err, lockfree.ErrExhausted) {
		t.Fatalf("Alloc() from another cache while a holds the free chunk = %v, want %v", err, lockfree.ErrExhausted)
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	got, err := b.Alloc()
	if err != nil || heaptest.Addr(got) != heaptest.Addr(held[0]) {
		t.Fatalf("Alloc() after a flushed = %#x, %v, want %#x", heaptest.Addr(got), err, heaptest.Addr(held[0]))
	}
	mustCheckCaches(t, p, "exhaustion", a, b)
	st := checkStats(t, p)
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	if st2 := checkStats(t, p); st2.InUse != n || st.InUse != n-1 {
		t.Fatalf("InUse = %d before b flushed (b has not reported its Alloc), %d after, want %d, %d", st.InUse, st2.InUse, n-1, n)
	}
}

// TestCacheForeign: a cache refuses what its pool did not hand out, and
// accepts chunks carved after it last looked.
func TestCacheForeign(t *testing.T) {
	p := heaptest.MustOver(t, lockfree.Over, make([]byte, 100*64), 64)
	other := heaptest.MustOver(t, lockfree.Over, make([]byte, 4*64), 64)
	c := p.NewCache()
	first, err := c.Alloc() // the cache sees 32 chunks carved
	if err != nil {
		t.Fatal(err)
	}
	oc := heaptest.MustAlloc(t, other)
	for _, probe := range []struct {
		name string
		b    []byte
	}{
		{"nil", nil},
		{"Go slice", make([]byte, 64)},
		{"interior", first[8:]},
		{"uncarved", heaptest.At(first, 64*60, 64)},
		{"other pool", oc},
	} {
		before, n := p.Stats(), c.Len()
		if err := c.Free(probe.b); !errors.Is(err, lockfree.ErrForeign) {
			t.Errorf("Free(%s) = %v, want %v", probe.name, err, lockfree.ErrForeign)
		}
		if after := p.Stats(); after != before || c.Len() != n {
			t.Errorf("Free(%s) changed the pool or the cache", probe.name)
		}
	}
	var late []byte
	for range 40 { // carve past what the cache saw
		late = heaptest.MustAlloc(t, p)
	}
	if i, _ := p.Index(late); i < lockfree.Batch {
		t.Fatalf("the last shared Alloc is chunk %d, want one carved after the cache's batch", i)
	}
	if err := c.Free(late); err != nil {
		t.Fatalf("cache Free(chunk carved after its last look) = %v, want nil", err)
	}
	mustCheckCaches(t, p, "foreign", c)
}

// TestMetadata checks that Stats.Metadata, the Go memory of the depot's
// array and of the regions' page bitmaps, is only the bitmaps' few words
// while no cache has traded with the pool, and grows as caches park more
// chunks in the depot: at least 4 bytes per chunk there.
func TestMetadata(t *testing.T) {
	p := heaptest.MustNew(t, lockfree.New, 64, lockfree.SlabSize(4096))
	for range 100 {
		heaptest.MustAlloc(t, p)
	}
	if st := p.Stats(); st.Metadata > 64 {
		t.Errorf("Stats().Metadata with no cache = %d, want the page bitmaps' few words (the side table counts in Footprint)", st.Metadata)
	}
	c := p.NewCache()
	var bs [][]byte
	last := int64(0)
	for _, n := range []int{4, 40, 400} {
		for len(bs) < n*lockfree.Batch {
			b, err := c.Alloc()
			if err != nil {
				t.Fatalf("Cache.Alloc() = %v", err)
			}
			bs = append(bs, b)
		}
		// Freeing them all parks all but the cache's last batch or two
		// in the depot.
		for _, b := range bs {
			if err := c.Free(b); err != nil {
				t.Fatalf("Cache.Free() = %v", err)
			}
		}
		depot := int64(p.DepotLen())
		st := p.Stats()
		if st.Metadata < 4*depot || st.Metadata <= last || st.Metadata > 8*depot+1024 {
			t.Errorf("%d chunks in the depot: Stats().Metadata = %d, want above %d (the last) and in [%d, %d]", depot, st.Metadata, last, 4*depot, 8*depot+1024)
		}
		last = st.Metadata
		// Take them back out for the next round.
		for i := range bs {
			b, err := c.Alloc()
			if err != nil {
				t.Fatalf("Cache.Alloc() = %v", err)
			}
			bs[i] = b
		}
	}
	for _, b := range bs {
		if err := c.Free(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	heaptest.MustCheck(t, p, "the caches' trades")
}
