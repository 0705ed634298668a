package heap_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/carvelab/carve/fit"
	"github.com/carvelab/carve/heap"
	"github.com/carvelab/carve/internal/churn"
	"github.com/carvelab/carve/internal/heaptest"
)

// The value cache benchmark: a map from keys to values of log-normally
// distributed sizes, under churn, with the values' bytes in one of three
// stores. BenchmarkValueCache measures ns/op here, and the rest (peak RSS,
// the GC's share of the CPU) in a process of its own per store: see
// cache_child_test.go.

// goHeap is the Go heap as an allocator: Alloc is make([]byte, size), and
// Free drops nothing but the caller's reference, which the garbage
// collector then reclaims.
type goHeap struct{}

func (goHeap) Alloc(size, align int) ([]byte, error) {
	if size < 0 || align != 1 {
		return nil, fmt.Errorf("goHeap: Alloc(%d, %d): want size >= 0 and align 1", size, align)
	}
	return make([]byte, size), nil
}

func (goHeap) Free([]byte) error { return nil }
func (goHeap) Close() error      { return nil }

// valueStores are the stores the benchmark compares: carve's heap, fit's
// best fit (with a Limit above its default 1 GiB, so that the full
// cache's fragmentation cannot exhaust it) and the Go heap.
var valueStores = []struct {
	name string
	make func() (allocator, error)
}{
	{"heap", func() (allocator, error) { return heap.New() }},
	{"best-fit", func() (allocator, error) { return fit.New(fit.BestFit, fit.Limit(8<<30)) }},
	{"make", func() (allocator, error) { return goHeap{}, nil }},
}

// newStore returns the store named name.
func newStore(name string) (allocator, error) {
	for _, s := range valueStores {
		if s.name == name {
			return s.make()
		}
	}
	return nil, fmt.Errorf("no store %q", name)
}

// valueCache maps keys to values whose bytes lie in a store. The map
// holds slices into the store's memory; the store's memory holds only
// bytes, never a Go pointer. A value starts with its key, little-endian,
// so that verify can tell values apart.
type valueCache struct {
	store  allocator
	values map[uint64][]byte
	keys   []uint64 // the keys present, in no order: what churn picks from
	next   uint64   // the smallest key never used
	src    []byte   // what values are copied from
	live   int64    // the bytes of the values present
	peak   int64    // the most live has been
}

// newValueCache returns a cache of n values over store, their sizes drawn
// from r.
func newValueCache(store allocator, n int, r *rand.Rand) (*valueCache, error) {
	c := &valueCache{
		store:  store,
		values: make(map[uint64][]byte, n),
		keys:   make([]uint64, n),
		src:    make([]byte, churn.MaxSize),
	}
	for i := range c.src {
		c.src[i] = byte(r.Uint32())
	}
	for i := range c.keys {
		c.keys[i] = c.next
		c.next++
		if err := c.put(c.keys[i], churn.Size(r)); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// put stores a value of n bytes under key, replacing the key's value if
// it has one: the new value is written before the old one is freed, as a
// cache that readers may still be reading from must.
func (c *valueCache) put(key uint64, n int) error {
	b, err := c.store.Alloc(n, 1)
	if err != nil {
		return err
	}
	copy(b, c.src[:n])
	binary.LittleEndian.PutUint64(b, key)
	if old, ok := c.values[key]; ok {
		if err := c.store.Free(old); err != nil {
			return err
		}
		c.live -= int64(len(old))
	}
	c.values[key] = b
	c.live += int64(n)
	c.peak = max(c.peak, c.live)
	return nil
}

// delete removes key and frees its value.
func (c *valueCache) delete(key uint64) error {
	old, ok := c.values[key]
	if !ok {
		return fmt.Errorf("delete(%d): no such key", key)
	}
	if err := c.store.Free(old); err != nil {
		return err
	}
	delete(c.values, key)
	c.live -= int64(len(old))
	return nil
}

// step is one operation of the churn, on a key picked at random: either
// a replace of its value with one of a new size, or a delete of the key
// followed by the insert of a key never used before, with a value of a
// new size. The number of values stays the same.
func (c *valueCache) step(r *rand.Rand) error {
	x := r.Uint64()
	i := int((x & math.MaxUint32) * uint64(len(c.keys)) >> 32) // uniform in [0, len(keys))
	n := churn.Size(r)
	if x>>63 == 0 {
		return c.put(c.keys[i], n)
	}
	if err := c.delete(c.keys[i]); err != nil {
		return err
	}
	c.keys[i] = c.next
	c.next++
	return c.put(c.keys[i], n)
}

// verify checks that the cache holds one value per key, each starting
// with its key and holding the source's bytes after it, and that live
// adds up.
func (c *valueCache) verify() error {
	if len(c.values) != len(c.keys) {
		return fmt.Errorf("%d values for %d keys", len(c.values), len(c.keys))
	}
	var live int64
	for _, k := range c.keys {
		v, ok := c.values[k]
		switch {
		case !ok:
			return fmt.Errorf("key %d has no value", k)
		case binary.LittleEndian.Uint64(v) != k:
			return fmt.Errorf("key %d's value starts with %d", k, binary.LittleEndian.Uint64(v))
		case string(v[8:]) != string(c.src[8:len(v)]):
			return fmt.Errorf("key %d's value of %d bytes lost its bytes", k, len(v))
		}
		live += int64(len(v))
	}
	if live != c.live {
		return fmt.Errorf("the values hold %d bytes, live says %d", live, c.live)
	}
	return nil
}

// close frees every value and closes the store.
func (c *valueCache) close() error {
	var err error
	for _, v := range c.values {
		err = errors.Join(err, c.store.Free(v))
	}
	c.values, c.keys = nil, nil
	return errors.Join(err, c.store.Close())
}

// cacheValues is how many values the benchmark's cache holds: 250,000, or
// 10,000 with -short, for smoke runs.
func cacheValues() int {
	if testing.Short() {
		return 10000
	}
	return 250000
}

// churnPerValue is how many churn operations per value the process of
// its own runs, so that most values have been replaced several times.
const churnPerValue = 8

// BenchmarkValueCache measures a cache of 250,000 values (10,000 with
// -short) of log-normal sizes (median 512 B, sigma 1.5, within 32 B to
// 64 KiB: a mean of 1,562 B, 372 MiB of values expected) under churn: each
// operation picks a key at random and replaces its value, or deletes it
// and inserts a new key, half the time each, with a value of a new size.
// The values' bytes lie in carve's heap, in fit's best fit, or on the Go
// heap (make), and the code over them is the same; the map and the keys,
// on the Go heap, count in every store's RSS.
//
// ns/op is measured here, after the cache is built. Then a process of its
// own per store (the test binary again, running TestValueCacheChild)
// builds the cache and runs 8 operations per value, and the benchmark
// reports what it measured: rss/live, the peak RSS above the RSS before
// the cache was built (VmHWM, reset at that point) over the most bytes the
// values held; gc-cpu-%, the GC's share of the time the Ps were busy over
// the GC cycles of the churn (/cpu/classes/gc/total:cpu-seconds over
// /cpu/classes/total less /cpu/classes/idle; see valueCacheResult for why
// not over getrusage's CPU time, which the log line gives too); and
// cpu-ns/op, the process's CPU time per operation (getrusage, user and
// system), which does not count the time the process waited for a core,
// as ns/op does on a busy machine. Compare the stores side by side:
//
//	taskset -c 1 go test -run '^$' -bench ValueCache -count 6 ./heap > vc.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /store vc.txt
func BenchmarkValueCache(b *testing.B) {
	n := cacheValues()
	for _, s := range valueStores {
		b.Run("store="+s.name, func(b *testing.B) {
			store, err := s.make()
			if err != nil {
				b.Fatal(err)
			}
			c, err := newValueCache(store, n, rand.New(rand.NewPCG(1, 1)))
			if err != nil {
				b.Fatal(err)
			}
			r := rand.New(rand.NewPCG(2, 2))
			for b.Loop() {
				if err := c.step(r); err != nil {
					b.Fatal(err)
				}
			}
			if err := c.verify(); err != nil {
				b.Fatal(err)
			}
			if err := c.close(); err != nil {
				b.Fatal(err)
			}
			c = nil
			runtime.GC()

			res, err := runValueCacheChild(s.name, n, churnPerValue*n)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(res.PeakRSS)/float64(res.PeakLive), "rss/live")
			b.ReportMetric(res.gcShare(), "gc-cpu-%")
			b.ReportMetric(float64(res.CPU)/float64(res.Ops), "cpu-ns/op")
			b.Logf("own process: %s", res)
		})
	}
}

// TestValueCache runs the benchmark's cache over each store, small, and
// checks its values after the churn.
func TestValueCache(t *testing.T) {
	for _, s := range valueStores {
		t.Run(s.name, func(t *testing.T) {
			store, err := s.make()
			if err != nil {
				t.Fatal(err)
			}
			c, err := newValueCache(store, 2000, rand.New(rand.NewPCG(1, 1)))
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(2, 2))
			for i := range 20000 {
				if err := c.step(r); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
			}
			if err := c.verify(); err != nil {
				t.Fatal(err)
			}
			if c.next <= 2000 {
				t.Fatalf("no key was deleted and another inserted: next key %d", c.next)
			}
			if h, ok := store.(*heap.Heap); ok {
				heaptest.MustCheck(t, h, "the churn")
				if got := h.Stats().Live; got != c.live {
					t.Fatalf("Stats().Live = %d, the cache holds %d", got, c.live)
				}
			}
			if err := c.close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
