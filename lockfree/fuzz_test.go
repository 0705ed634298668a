package lockfree_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/internal/invariants"
	"github.com/carvelab/carve/lockfree"
	"github.com/carvelab/carve/mem"
)

// FuzzOps runs random sequences of operations, decoded from the input, on
// one goroutine against a reference model: a map from each live chunk's
// address to the id whose pattern fills it. The operations mix the shared
// Alloc and Free with two caches, flushes, and frees of what the pool did
// not hand out. After every operation the chunks must lie inside the
// pool's memory, aligned, distinct, with the bytes written into them; the
// counts must add up; and the checkers of the pool and the caches must
// pass.
//
// Long runs: go test -run '^$' -fuzz FuzzOps -fuzztime 60s ./lockfree
// (and again with -tags carvecheck).
func FuzzOps(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s.over, s.size, s.alignLog, s.room, s.ops)
	}
	f.Fuzz(func(t *testing.T, over bool, size, alignLog, room uint8, ops []byte) {
		runOps(t, fuzzConfig{over, size, alignLog, room, ops})
	})
}

// TestRandomOps runs the fuzz body over pseudo-random inputs from a fixed
// seed: a few by default, many with CARVE_LONG=1.
func TestRandomOps(t *testing.T) {
	heaptest.Inputs(t, 5, 6, heaptest.Count{Default: 40, Long: 20000}, func(r *rand.Rand) (string, func(t *testing.T)) {
		ops := make([]byte, r.IntN(800))
		for j := range ops {
			ops[j] = byte(r.Uint32())
		}
		cfg := fuzzConfig{over: r.IntN(2) == 0, size: uint8(r.Uint32()), alignLog: uint8(r.Uint32()), room: uint8(r.Uint32()), ops: ops}
		return fmt.Sprintf("%+v", cfg), func(t *testing.T) { runOps(t, cfg) }
	})
}

// fuzzConfig is one fuzz input.
type fuzzConfig struct {
	over     bool   // Over a Go slice, else New
	size     uint8  // chunk size: 1 + size
	alignLog uint8  // alignment: 1 << (alignLog % 7)
	room     uint8  // Over: chunks the region holds, 1 + room % 200; New: the limit, 1 + room % 4 slabs
	ops      []byte // kind in the low 3 bits, an argument in the high 5
}

// The operations, the low three bits of an op byte.
const (
	opAlloc      = 0 // allocate 1 << (arg % 4) chunks from the shared pool
	opFree       = 1 // free the live chunk arg to the shared pool
	opCacheAlloc = 2 // allocate 1 << (arg/2 % 4) chunks from cache arg%2
	opCacheFree  = 3 // free the live chunk arg/2 to cache arg%2
	opFlush      = 4 // flush cache arg%2
	opProbe      = 5 // free what the pool did not hand out (variant arg % 5)
	opBurst      = 6 // allocate 40 from cache arg%2, then free them to it: batches move
	opFreeAll    = 7 // free every live chunk, alternating the paths
)

func op(kind, arg int) byte { return byte(kind | arg<<3) }

var fuzzSeeds = []fuzzConfig{
	{false, 63, 3, 0, []byte{op(opAlloc, 3), op(opCacheAlloc, 6), op(opFree, 2), op(opCacheFree, 5), op(opProbe, 0), op(opProbe, 1), op(opProbe, 2), op(opProbe, 3), op(opProbe, 4), op(opFlush, 0), op(opAlloc, 3), op(opFreeAll, 0)}},
	{true, 7, 0, 40, []byte{op(opCacheAlloc, 7), op(opCacheAlloc, 6), op(opCacheAlloc, 7), op(opAlloc, 3), op(opCacheFree, 0), op(opCacheFree, 3), op(opFlush, 1), op(opAlloc, 3), op(opBurst, 0), op(opBurst, 1), op(opFreeAll, 0), op(opFlush, 0), op(opFlush, 1)}},
	{true, 200, 6, 3, []byte{op(opAlloc, 2), op(opAlloc, 2), op(opCacheAlloc, 0), op(opFree, 0), op(opCacheAlloc, 1), op(opFlush, 0), op(opAlloc, 0), op(opProbe, 3)}},
	{false, 255, 2, 3, []byte{op(opBurst, 0), op(opBurst, 1), op(opAlloc, 3), op(opAlloc, 3), op(opAlloc, 3), op(opAlloc, 3), op(opCacheAlloc, 7), op(opFreeAll, 0), op(opBurst, 0)}},
	{true, 0, 0, 0, []byte{op(opCacheAlloc, 0), op(opAlloc, 0), op(opCacheFree, 0), op(opAlloc, 0), op(opFlush, 0), op(opAlloc, 0)}},
}

// modelChunk is what the model knows of a live chunk.
type modelChunk struct {
	b  []byte
	id int
}

// runner holds a pool under test, its caches and the reference model.
type runner struct {
	t       *testing.T
	cfg     fuzzConfig
	p       *lockfree.Pool
	caches  [2]*lockfree.Cache
	other   *lockfree.Pool // for chunks of another pool
	chunk   int
	align   int
	stride  int
	maxLive int // chunks the pool can ever carve
	live    map[uintptr]modelChunk
	order   []uintptr // live chunks, in allocation order
	freed   [][]byte  // recently freed chunks, for double frees
	nextID  int
}

func runOps(t *testing.T, cfg fuzzConfig) {
	r := &runner{t: t, cfg: cfg, live: map[uintptr]modelChunk{}}
	r.chunk = 1 + int(cfg.size)
	r.align = 1 << (cfg.alignLog % 7)
	r.stride = (r.chunk + r.align - 1) / r.align * r.align
	if cfg.over {
		n := 1 + int(cfg.room)%200
		r.p = heaptest.MustOver(t, lockfree.Over, make([]byte, n*r.stride+r.align-1), r.chunk, lockfree.Align(r.align))
		r.maxLive = n
	} else {
		page := mem.PageSize()
		slab := page
		for slab/r.stride < 8 {
			slab <<= 1
		}
		limit := (1 + int(cfg.room)%4) * slab
		r.p = heaptest.MustNew(t, lockfree.New, r.chunk, lockfree.Align(r.align), lockfree.SlabSize(page), lockfree.Limit(int64(limit)))
		r.maxLive = limit / r.stride
	}
	r.caches = [2]*lockfree.Cache{r.p.NewCache(), r.p.NewCache()}
	r.other = heaptest.MustOver(t, lockfree.Over, make([]byte, 4*r.stride), r.chunk, lockfree.Align(r.align))
	r.verify("open")

	ops := cfg.ops
	if len(ops) > 4096 {
		ops = ops[:4096]
	}
	for k, o := range ops {
		kind, arg := int(o&7), int(o>>3)
		c := r.caches[arg%2]
		switch kind {
		case opAlloc:
			for range 1 << (arg % 4) {
				r.alloc(nil)
			}
		case opFree:
			r.free(nil, arg)
		case opCacheAlloc:
			for range 1 << (arg / 2 % 4) {
				r.alloc(c)
			}
		case opCacheFree:
			r.free(c, arg/2)
		case opFlush:
			if err := c.Flush(); err != nil {
				t.Fatalf("Flush() = %v, want nil", err)
			}
		case opProbe:
			r.probe(c, arg%5)
		case opBurst:
			n := len(r.order)
			for range 40 {
				r.alloc(c)
			}
			for len(r.order) > n {
				r.free(c, len(r.order)-1)
			}
		case opFreeAll:
			for len(r.order) > 0 {
				if len(r.order)%3 == 0 {
					r.free(nil, 0)
				} else {
					r.free(r.caches[len(r.order)%2], 0)
				}
			}
		}
		r.verify("op " + itoa(k))
	}
	for len(r.order) > 0 {
		r.free(nil, 0)
	}
	for _, c := range r.caches {
		if err := c.Flush(); err != nil {
			t.Fatalf("Flush() = %v, want nil", err)
		}
	}
	r.verify("the end")
	if st := r.p.Stats(); st.InUse != 0 || st.Cached != 0 {
		t.Fatalf("Stats() with everything freed and flushed = %+v, want InUse 0, Cached 0", st)
	}
}

// alloc allocates one chunk from c, or from the shared pool if c is nil,
// checks it against the model and fills it.
func (r *runner) alloc(c *lockfree.Cache) {
	t := r.t
	var b []byte
	var err error
	if c != nil {
		b, err = c.Alloc()
	} else {
		b, err = r.p.Alloc()
	}
	if err != nil {
		if b != nil || !errors.Is(err, lockfree.ErrExhausted) {
			t.Fatalf("Alloc() = %#x, %v, want a chunk or nil, %v", heaptest.Addr(b), err, lockfree.ErrExhausted)
		}
		// Only a pool with nothing to give may say so: everything carved,
		// nothing on the free list or in the depot, nothing in this cache.
		st := r.p.Stats()
		if st.Free != 0 || st.Carved != int64(r.maxLive) || c != nil && c.Len() != 0 {
			t.Fatalf("Alloc() = %v, but the pool can give: %+v (cache holds %d)", err, st, c.Len())
		}
		return
	}
	a := heaptest.Addr(b)
	if len(b) != r.chunk || cap(b) != r.chunk {
		t.Fatalf("Alloc() = len %d cap %d, want %d", len(b), cap(b), r.chunk)
	}
	if a%uintptr(r.align) != 0 {
		t.Fatalf("Alloc() = %#x, want aligned to %d", a, r.align)
	}
	lo, hi := r.p.Bounds()
	if a < lo || a+uintptr(r.chunk) > hi {
		t.Fatalf("Alloc() = [%#x, %#x), want inside [%#x, %#x)", a, a+uintptr(r.chunk), lo, hi)
	}
	if _, dup := r.live[a]; dup {
		t.Fatalf("Alloc() = %#x, which is live already", a)
	}
	heaptest.Fill(b, r.nextID)
	r.live[a] = modelChunk{b, r.nextID}
	r.order = append(r.order, a)
	r.nextID++
}

// free checks that live chunk k (mod the number live) kept its bytes and
// frees it to c, or to the shared pool if c is nil.
func (r *runner) free(c *lockfree.Cache, k int) {
	t := r.t
	if len(r.order) == 0 {
		return
	}
	k %= len(r.order)
	a := r.order[k]
	m := r.live[a]
	if i := heaptest.Intact(m.b, m.id); i >= 0 {
		t.Fatalf("chunk %#x (id %d): byte %d = %#x, want %#x", a, m.id, i, m.b[i], heaptest.Pattern(m.id, i))
	}
	var err error
	if c != nil {
		err = c.Free(m.b)
	} else {
		err = r.p.Free(m.b)
	}
	if err != nil {
		t.Fatalf("Free(%#x) = %v, want nil", a, err)
	}
	delete(r.live, a)
	r.order = append(r.order[:k], r.order[k+1:]...)
	if len(r.freed) == 16 {
		r.freed = r.freed[1:]
	}
	r.freed = append(r.freed, m.b)
}

// probe frees something the pool did not hand out, to the shared pool or
// cache c, and checks that it is refused and nothing changes.
func (r *runner) probe(c *lockfree.Cache, variant int) {
	t := r.t
	var b []byte
	want := lockfree.ErrForeign
	var some []byte
	if len(r.order) > 0 {
		some = r.live[r.order[len(r.order)/2]].b
	}
	switch variant {
	case 0:
		b = nil
	case 1:
		b = make([]byte, r.chunk)
	case 2: // interior of a live chunk
		if some == nil || r.chunk == 1 {
			return
		}
		b = some[1+len(r.order)%(r.chunk-1):]
	case 3:
		o, err := r.other.Alloc()
		if err != nil {
			return
		}
		b = o
	case 4: // a double free, which only checked builds detect
		if !invariants.Enabled {
			return
		}
		for _, f := range r.freed {
			if _, ok := r.live[heaptest.Addr(f)]; !ok {
				b = f
				want = lockfree.ErrDoubleFree
				break
			}
		}
		if b == nil {
			return
		}
	}
	before, n := r.p.Stats(), c.Len()
	var err error
	if len(r.order)%2 == 0 {
		err = c.Free(b)
	} else {
		err = r.p.Free(b)
	}
	if !errors.Is(err, want) {
		t.Fatalf("Free(%#x) (probe %d) = %v, want %v", heaptest.Addr(b), variant, err, want)
	}
	// Resident is the kernel's count of the pages, which the pool does
	// not own alone: a pool over Go memory shares its pages with the Go
	// heap, and anything that writes to another object on one of them (an
	// allocation, the GC) makes the page resident.
	after := r.p.Stats()
	after.Resident, before.Resident = 0, 0
	if after != before || c.Len() != n {
		t.Fatalf("Stats() after a refused Free(%#x) (probe %d) = %+v, want unchanged %+v", heaptest.Addr(b), variant, after, before)
	}
}

// verify checks the invariants of the pool and caches and the counts
// against the model. A cache reports its count to the pool only when it
// trades, so the pool's InUse + Cached is what callers and caches hold.
func (r *runner) verify(step string) {
	t := r.t
	t.Helper()
	mustCheckCaches(t, r.p, step, r.caches[:]...)
	st := checkStats(t, r.p)
	held := int64(r.caches[0].Len() + r.caches[1].Len())
	if st.InUse+st.Cached != int64(len(r.live))+held || st.Quarantined != 0 {
		t.Fatalf("Stats() after %s = InUse %d + Cached %d, Quarantined %d, want %d live + %d in caches, 0",
			step, st.InUse, st.Cached, st.Quarantined, len(r.live), held)
	}
	if st.ChunkSize != r.chunk || st.Stride != r.stride || st.Align != r.align || st.Carved > int64(r.maxLive) {
		t.Fatalf("Stats() = %+v, want ChunkSize %d, Stride %d, Align %d, at most %d carved", st, r.chunk, r.stride, r.align, r.maxLive)
	}
}
