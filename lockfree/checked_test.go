//go:build carvecheck

package lockfree_test

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/lockfree"
)

// The tests of checked builds (-tags carvecheck): double frees are refused
// whichever path frees, freed chunks are poisoned and a chunk written after
// free is quarantined when it would be handed out again, and a cache used
// by two goroutines at once is caught.

func TestDoubleFree(t *testing.T) {
	type path struct {
		name string
		free func(p *lockfree.Pool, c *lockfree.Cache, b []byte) error
	}
	shared := path{"pool", func(p *lockfree.Pool, _ *lockfree.Cache, b []byte) error { return p.Free(b) }}
	cached := path{"cache", func(_ *lockfree.Pool, c *lockfree.Cache, b []byte) error { return c.Free(b) }}
	flushed := path{"cache, flushed", func(_ *lockfree.Pool, c *lockfree.Cache, b []byte) error {
		if err := c.Free(b); err != nil {
			return err
		}
		return c.Flush()
	}}
	for _, first := range []path{shared, cached, flushed} {
		for _, second := range []path{shared, cached} {
			t.Run(first.name+" then "+second.name, func(t *testing.T) {
				p := heaptest.MustOver(t, lockfree.Over, make([]byte, 64*64), 64)
				c := p.NewCache()
				var bs [][]byte
				for range 5 {
					bs = append(bs, heaptest.MustAlloc(t, p))
				}
				if err := first.free(p, c, bs[2]); err != nil {
					t.Fatalf("Free() = %v, want nil", err)
				}
				before, n := p.Stats(), c.Len()
				if err := second.free(p, c, bs[2]); !errors.Is(err, lockfree.ErrDoubleFree) {
					t.Fatalf("Free() again = %v, want %v", err, lockfree.ErrDoubleFree)
				}
				if after := p.Stats(); after != before || c.Len() != n {
					t.Fatalf("a refused double free changed the pool or the cache")
				}
				mustCheckCaches(t, p, "double free", c)
			})
		}
	}
}

// TestDoubleFreeRace frees one chunk from two goroutines at once: exactly
// one Free succeeds.
func TestDoubleFreeRace(t *testing.T) {
	p := heaptest.MustOver(t, lockfree.Over, make([]byte, 64*64), 64)
	for range 200 {
		b := heaptest.MustAlloc(t, p)
		var ok atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 2 {
			wg.Go(func() {
				<-start
				if err := p.Free(b); err == nil {
					ok.Add(1)
				} else if !errors.Is(err, lockfree.ErrDoubleFree) {
					t.Errorf("Free() = %v, want nil or %v", err, lockfree.ErrDoubleFree)
				}
			})
		}
		close(start)
		wg.Wait()
		if ok.Load() != 1 {
			t.Fatalf("%d of two racing Frees of one chunk succeeded, want 1", ok.Load())
		}
	}
	heaptest.MustCheck(t, p, "racing frees")
}

func TestWriteAfterFree(t *testing.T) {
	for _, viaCache := range []bool{false, true} {
		name := map[bool]string{false: "pool", true: "cache"}[viaCache]
		t.Run(name, func(t *testing.T) {
			p := heaptest.MustOver(t, lockfree.Over, make([]byte, 64*64), 64)
			c := p.NewCache()
			alloc := p.Alloc
			free := p.Free
			if viaCache {
				alloc, free = c.Alloc, c.Free
			}
			a, err := alloc()
			if err != nil {
				t.Fatal(err)
			}
			b, err := alloc()
			if err != nil {
				t.Fatal(err)
			}
			if err := free(b); err != nil {
				t.Fatal(err)
			}
			if err := free(a); err != nil {
				t.Fatal(err)
			}
			if a[5] != 0xdb {
				t.Fatalf("freed chunk byte 5 = %#x, want the poison 0xdb", a[5])
			}
			a[5] = 1 // the bug: a write after free
			if got, err := alloc(); got != nil || !errors.Is(err, lockfree.ErrCorrupt) {
				t.Fatalf("Alloc() of the chunk written after free = %v, want %v", err, lockfree.ErrCorrupt)
			}
			got, err := alloc()
			if err != nil || heaptest.Addr(got) != heaptest.Addr(b) {
				t.Fatalf("Alloc() after the quarantine = %#x, %v, want the next free chunk %#x", heaptest.Addr(got), err, heaptest.Addr(b))
			}
			mustCheckCaches(t, p, "quarantine", c)
			if err := free(a); !errors.Is(err, lockfree.ErrDoubleFree) {
				t.Fatalf("Free(quarantined chunk) = %v, want %v", err, lockfree.ErrDoubleFree)
			}
			if err := c.Flush(); err != nil {
				t.Fatal(err)
			}
			if st := checkStats(t, p); st.Quarantined != 1 || st.InUse != 1 {
				t.Fatalf("Stats() = %+v, want 1 quarantined, 1 in use", st)
			}
		})
	}
}

// TestCacheBusy stalls a goroutine inside a cache (in its refill, with the
// pop hook) and uses the cache from another: every call is refused and
// changes nothing.
func TestCacheBusy(t *testing.T) {
	p := heaptest.MustOver(t, lockfree.Over, make([]byte, 64*64), 64)
	var bs [][]byte
	for range 4 {
		bs = append(bs, heaptest.MustAlloc(t, p))
	}
	for _, b := range bs[1:] {
		heaptest.MustFree(t, p, b)
	}
	hook, stalled, resume := stall()
	p.SetPopHook(hook)
	c := p.NewCache()
	done := make(chan error)
	go func() {
		_, err := c.Alloc()
		done <- err
	}()
	<-stalled
	if _, err := c.Alloc(); !errors.Is(err, lockfree.ErrBusy) {
		t.Errorf("Alloc() while another goroutine is in the cache = %v, want %v", err, lockfree.ErrBusy)
	}
	if err := c.Free(bs[0]); !errors.Is(err, lockfree.ErrBusy) {
		t.Errorf("Free() while another goroutine is in the cache = %v, want %v", err, lockfree.ErrBusy)
	}
	if err := c.Flush(); !errors.Is(err, lockfree.ErrBusy) {
		t.Errorf("Flush() while another goroutine is in the cache = %v, want %v", err, lockfree.ErrBusy)
	}
	close(resume)
	if err := <-done; err != nil {
		t.Fatalf("the stalled Alloc() = %v, want nil", err)
	}
	mustCheckCaches(t, p, "busy", c)
	if err := c.Free(bs[0]); err != nil {
		t.Fatalf("Free() after = %v, want nil", err)
	}
}

func TestCacheAfterClose(t *testing.T) {
	p, err := lockfree.Over(make([]byte, 64*64), 64)
	if err != nil {
		t.Fatal(err)
	}
	c := p.NewCache()
	b, err := c.Alloc()
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	if _, err := c.Alloc(); !errors.Is(err, lockfree.ErrClosed) {
		t.Errorf("Alloc() after Close = %v, want %v", err, lockfree.ErrClosed)
	}
	if err := c.Free(b); !errors.Is(err, lockfree.ErrClosed) {
		t.Errorf("Free() after Close = %v, want %v", err, lockfree.ErrClosed)
	}
}

// TestSlowPathCheck breaks what each lock guards as a bug would: the next
// slow path that holds the lock, with its checker due, must stop the
// program.
func TestSlowPathCheck(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(p *lockfree.Pool, c *lockfree.Cache)
		op     func(p *lockfree.Pool, c *lockfree.Cache)
	}{
		{"growth, carving", func(p *lockfree.Pool, _ *lockfree.Cache) { p.BreakCommitted() },
			func(p *lockfree.Pool, _ *lockfree.Cache) { p.Alloc() }},
		{"depot, put", func(p *lockfree.Pool, _ *lockfree.Cache) { p.BreakDepot(); p.CheckDue() },
			func(_ *lockfree.Pool, c *lockfree.Cache) { c.Flush() }},
		{"depot, take", func(p *lockfree.Pool, c *lockfree.Cache) { c.Flush(); p.BreakDepot(); p.CheckDue() },
			func(p *lockfree.Pool, _ *lockfree.Cache) { p.Alloc() }},
		{"cache, alloc", func(_ *lockfree.Pool, c *lockfree.Cache) { c.BreakCache(); c.CheckDue() },
			func(_ *lockfree.Pool, c *lockfree.Cache) { c.Alloc() }},
		{"cache, free", func(_ *lockfree.Pool, c *lockfree.Cache) { c.BreakCache(); c.CheckDue() },
			func(p *lockfree.Pool, c *lockfree.Cache) { c.Free(heaptest.MustAlloc(t, p)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := heaptest.MustNew(t, lockfree.New, 64, lockfree.SlabSize(4096))
			c := p.NewCache()
			for range 3 {
				b, err := c.Alloc()
				if err != nil {
					t.Fatalf("Cache.Alloc() = %v", err)
				}
				if err := c.Free(b); err != nil {
					t.Fatalf("Cache.Free() = %v", err)
				}
			}
			// Carve the first slab whole: the next carve must grow.
			for range 4096/64 - lockfree.Batch {
				heaptest.MustAlloc(t, p)
			}
			tt.break_(p, c)
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.HasPrefix(s, "lockfree: invariant broken: ") {
					t.Errorf("%s with broken bookkeeping: recovered %v, want a panic of the checker", tt.name, r)
				}
			}()
			tt.op(p, c)
		})
	}
}

// TestSlowPathCheckLinear checks that the depot's checker runs while
// caches trade batches through it, and that its steps stay within the
// calls made, so that checked builds stay linear.
func TestSlowPathCheckLinear(t *testing.T) {
	const n = 1 << 14
	p := heaptest.MustNew(t, lockfree.New, 16, lockfree.SlabSize(4096))
	c := p.NewCache()
	bs := make([][]byte, 0, n)
	for range n {
		b, err := c.Alloc()
		if err != nil {
			t.Fatalf("Cache.Alloc() = %v", err)
		}
		bs = append(bs, b)
	}
	for _, b := range bs {
		if err := c.Free(b); err != nil {
			t.Fatalf("Cache.Free() = %v", err)
		}
	}
	// Another cache takes every batch back from the depot.
	c2 := p.NewCache()
	for range n {
		if _, err := c2.Alloc(); err != nil {
			t.Fatalf("Cache.Alloc() = %v", err)
		}
	}
	calls, runs, work := p.DepotCheckCounts()
	t.Logf("%d takes and puts: %d checker runs, %d steps", calls, runs, work)
	if runs < 5 {
		t.Errorf("the depot's checker ran %d times over %d takes and puts, want at least 5", runs, calls)
	}
	if work > calls+n {
		t.Errorf("the depot's checker took %d steps over %d calls: the checks are not linear", work, calls)
	}
}
