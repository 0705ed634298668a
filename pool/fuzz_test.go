package pool_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/internal/invariants"
	"github.com/carvelab/carve/mem"
	"github.com/carvelab/carve/pool"
)

// FuzzPool runs random sequences of operations, decoded from the input,
// against a reference model: a map from each live chunk's address to the
// id whose pattern fills it. After every operation the pool's chunks must
// lie inside its memory, aligned, overlapping no other, with the bytes
// written into them; the counts must add up; and Check must pass.
//
// Long runs: go test -run '^$' -fuzz FuzzPool -fuzztime 60s ./pool
// (and again with -tags carvecheck).
func FuzzPool(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s.over, s.size, s.alignLog, s.slabLog, s.limitSlabs, s.regionLen, s.regionOff, s.ops)
	}
	f.Fuzz(func(t *testing.T, over bool, size uint16, alignLog, slabLog, limitSlabs uint8, regionLen uint16, regionOff uint8, ops []byte) {
		runOps(t, fuzzConfig{over, size, alignLog, slabLog, limitSlabs, regionLen, regionOff, ops})
	})
}

// TestRandomOps runs the fuzz body over pseudo-random inputs from a fixed
// seed: a few by default, many with CARVE_LONG=1.
func TestRandomOps(t *testing.T) {
	heaptest.Inputs(t, 1, 2, heaptest.Count{Default: 40, Long: 20000}, func(r *rand.Rand) (string, func(t *testing.T)) {
		ops := make([]byte, r.IntN(600))
		for j := range ops {
			ops[j] = byte(r.Uint32())
		}
		cfg := fuzzConfig{
			over: r.IntN(3) == 0, size: uint16(r.Uint32()), alignLog: uint8(r.IntN(13)),
			slabLog: uint8(r.Uint32()), limitSlabs: uint8(r.Uint32()),
			regionLen: uint16(r.Uint32()), regionOff: uint8(r.Uint32()), ops: ops,
		}
		if r.IntN(2) == 0 {
			cfg.size %= 256 // small chunks, many of them
		}
		return fmt.Sprintf("%+v", cfg), func(t *testing.T) { runOps(t, cfg) }
	})
}

// fuzzConfig is one fuzz input.
type fuzzConfig struct {
	over       bool   // Over a Go slice, else New
	size       uint16 // chunk size: 8 + size % 4089
	alignLog   uint8  // alignment: 1 << (alignLog % 13), at most the page
	slabLog    uint8  // New: slab size: page << (slabLog % 4)
	limitSlabs uint8  // New: limit: 1 + limitSlabs % 16 slabs
	regionLen  uint16 // Over: region length
	regionOff  uint8  // Over: where the region starts in its Go slice
	ops        []byte // kind in the low 3 bits, an argument in the high 5
}

// The operations, the low three bits of an op byte.
const (
	opAlloc    = 0 // 0, 1, 2: allocate 1 << (arg % 6) chunks
	opFree     = 3 // 3, 4: free 1 + arg % 8 chunks from the index in the next byte
	opFreeSlab = 5 // free every live chunk of slab arg % slabs (Over: every other chunk)
	opProbe    = 6 // free what the pool did not hand out (variant arg % 7)
	opTrim     = 7
)

func op(kind, arg int) byte { return byte(kind | arg<<3) }

var fuzzSeeds = []fuzzConfig{
	{false, 56, 3, 0, 1, 0, 0, []byte{op(0, 5), op(0, 5), op(3, 7), 3, op(6, 0), op(6, 1), op(6, 2), op(6, 3), op(6, 4), op(6, 5), op(6, 6), op(7, 0), op(0, 5), op(0, 5)}},
	{false, 1016, 3, 0, 3, 0, 0, []byte{op(0, 5), op(0, 5), op(5, 0), op(7, 0), op(5, 1), op(7, 0), op(0, 5), op(0, 5), op(0, 5), op(3, 2), 0, op(7, 0), op(0, 3)}},
	{false, 92, 12, 0, 2, 0, 0, []byte{op(0, 4), op(0, 4), op(0, 4), op(5, 1), op(7, 0), op(0, 5), op(6, 5), op(6, 3)}},
	{false, 4088, 6, 3, 0, 0, 0, []byte{op(0, 3), op(0, 0), op(3, 3), 1, op(7, 0), op(0, 4), op(6, 3)}},
	{true, 16, 4, 0, 0, 1000, 3, []byte{op(0, 5), op(0, 5), op(3, 4), 9, op(6, 2), op(6, 5), op(6, 3), op(0, 5), op(0, 5), op(7, 0), op(5, 0), op(6, 6)}},
	{true, 0, 0, 0, 0, 64, 1, []byte{op(0, 3), op(0, 0), op(3, 0), 0, op(0, 0), op(6, 3), op(6, 5)}},
	{true, 4088, 12, 0, 0, 20000, 7, []byte{op(0, 2), op(0, 2), op(3, 1), 2, op(0, 1), op(6, 4)}},
	{true, 50, 0, 0, 0, 3, 0, nil}, // region too small
}

// modelChunk is what the model knows of a live chunk.
type modelChunk struct {
	c  []byte
	id int
}

// runner holds a pool under test and its reference model.
type runner struct {
	t      *testing.T
	cfg    fuzzConfig
	p      *pool.Pool
	other  *pool.Pool // for chunks of another pool
	region []byte     // Over: the caller's region
	chunk  int
	align  int // the alignment in force
	stride int
	slab   int   // New: the slab size in force
	limit  int64 // New: the bytes it may commit
	live   map[uintptr]modelChunk
	addrs  []uintptr // live chunks, sorted
	freed  [][]byte  // recently freed chunks, for double frees
	nextID int
}

func runOps(t *testing.T, cfg fuzzConfig) {
	page := mem.PageSize()
	r := &runner{t: t, cfg: cfg, live: map[uintptr]modelChunk{}}
	r.chunk = 8 + int(cfg.size)%4089
	r.align = min(1<<(cfg.alignLog%13), page)
	r.stride = roundUp(r.chunk, max(r.align, pool.LinkSize))
	r.align = max(r.align, pool.LinkSize)
	if !r.open() {
		return
	}
	defer r.p.Close()
	other, err := pool.Over(make([]byte, 4*r.stride), r.chunk)
	if err != nil {
		t.Fatalf("Over(%d bytes, %d) = %v, want nil", 4*r.stride, r.chunk, err)
	}
	r.other = other
	r.verify("open")

	ops := cfg.ops
	if len(ops) > 4096 {
		ops = ops[:4096]
	}
	for i := 0; i < len(ops); i++ {
		kind, arg := int(ops[i]&7), int(ops[i]>>3)
		switch kind {
		case 0, 1, 2:
			for range 1 << (arg % 6) {
				if !r.alloc() {
					break
				}
			}
		case opFree, opFree + 1:
			var idx int
			if i+1 < len(ops) {
				i++
				idx = int(ops[i])
			}
			for j := range 1 + arg%8 {
				if len(r.addrs) == 0 {
					break
				}
				r.free(r.addrs[(idx+j*37)%len(r.addrs)])
			}
		case opFreeSlab:
			r.freeSlab(arg)
		case opProbe:
			r.probe(arg % 7)
		case opTrim:
			r.trim()
		}
		r.verify("op " + itoa(i))
	}
	r.verifyAll("the end")
	if err := r.p.Close(); err != nil {
		t.Fatalf("Close() = %v, want nil", err)
	}
	if c, err := r.p.Alloc(); c != nil || !errors.Is(err, pool.ErrClosed) {
		t.Fatalf("Alloc() after Close = %v, want %v", err, pool.ErrClosed)
	}
}

func roundUp(n, to int) int { return (n + to - 1) / to * to }

// open makes the pool the input asks for, or checks that it must be
// refused.
func (r *runner) open() bool {
	t, cfg := r.t, r.cfg
	page := mem.PageSize()
	if cfg.over {
		off := int(cfg.regionOff % 64)
		r.region = make([]byte, off+int(cfg.regionLen))[off:]
		p, err := pool.Over(r.region, r.chunk, pool.Align(r.align))
		pad := int(-heaptest.Addr(r.region) & uintptr(r.align-1))
		if fits := len(r.region) >= pad+r.stride; fits != (err == nil) {
			t.Fatalf("Over(%d bytes at %#x, %d, Align(%d)) = %v, want a pool: %t", len(r.region), heaptest.Addr(r.region), r.chunk, r.align, err, fits)
		}
		if err != nil {
			if !errors.Is(err, pool.ErrChunkSize) {
				t.Fatalf("Over(%d bytes, %d) = %v, want %v", len(r.region), r.chunk, err, pool.ErrChunkSize)
			}
			return false
		}
		r.p = p
		return true
	}
	r.slab = page << (cfg.slabLog % 4)
	for r.slab/r.stride < 8 {
		r.slab <<= 1
	}
	r.limit = int64(1+cfg.limitSlabs%16) * int64(r.slab)
	p, err := pool.New(r.chunk, pool.Align(r.align), pool.SlabSize(page<<(cfg.slabLog%4)), pool.Limit(r.limit))
	if err != nil {
		t.Fatalf("New(%d, Align(%d), SlabSize(%d), Limit(%d)) = %v, want nil", r.chunk, r.align, page<<(cfg.slabLog%4), r.limit, err)
	}
	r.p = p
	if lo, hi := p.Bounds(); hi-lo != uintptr(r.limit) {
		t.Fatalf("Bounds() = [%#x, %#x): %d bytes, want the limit %d", lo, hi, hi-lo, r.limit)
	}
	return true
}

// alloc allocates one chunk, checks it against the model and fills it; it
// returns false when the pool is exhausted.
func (r *runner) alloc() bool {
	t := r.t
	before := r.p.Stats()
	c, err := r.p.Alloc()
	if err != nil {
		if c != nil || !errors.Is(err, pool.ErrExhausted) {
			t.Fatalf("Alloc() = %#x, %v, want a chunk or nil, %v", heaptest.Addr(c), err, pool.ErrExhausted)
		}
		// Only a pool that is really full may say so.
		st := r.p.Stats()
		full := st.Free == 0 && st.Carved == st.Capacity
		if !r.cfg.over {
			full = full && int64(st.Slabs+1)*int64(r.slab) > r.limit
		}
		if !full {
			t.Fatalf("Alloc() = %v, but the pool is not full: %+v (limit %d)", err, st, r.limit)
		}
		return false
	}
	// A pool commits a slab only when no chunk is free, and one at a time.
	if after := r.p.Stats(); after.Slabs != before.Slabs && (before.Free != 0 || after.Slabs != before.Slabs+1) {
		t.Fatalf("Alloc() took the pool from %d to %d slabs with %d chunks free, want one more slab and only when none is free",
			before.Slabs, after.Slabs, before.Free)
	}
	a := heaptest.Addr(c)
	if len(c) != r.chunk || cap(c) != r.chunk {
		t.Fatalf("Alloc() = len %d cap %d, want %d", len(c), cap(c), r.chunk)
	}
	if a%uintptr(r.align) != 0 {
		t.Fatalf("Alloc() = %#x, want aligned to %d", a, r.align)
	}
	lo, hi := r.p.Bounds()
	if a < lo || a+uintptr(r.chunk) > hi || !r.p.Committed(c) {
		t.Fatalf("Alloc() = [%#x, %#x), want inside committed memory of [%#x, %#x)", a, a+uintptr(r.chunk), lo, hi)
	}
	pos, found := slices.BinarySearch(r.addrs, a)
	if found || pos > 0 && r.addrs[pos-1]+uintptr(r.chunk) > a || pos < len(r.addrs) && a+uintptr(r.chunk) > r.addrs[pos] {
		t.Fatalf("Alloc() = %#x, which overlaps a live chunk (chunk size %d)", a, r.chunk)
	}
	r.addrs = slices.Insert(r.addrs, pos, a)
	heaptest.Fill(c, r.nextID)
	r.live[a] = modelChunk{c, r.nextID}
	r.nextID++
	return true
}

// free checks that the live chunk at a kept its bytes, then frees it.
func (r *runner) free(a uintptr) {
	t := r.t
	m := r.live[a]
	if i := heaptest.Intact(m.c, m.id); i >= 0 {
		t.Fatalf("chunk %#x (id %d): byte %d = %#x, want %#x", a, m.id, i, m.c[i], heaptest.Pattern(m.id, i))
	}
	if err := r.p.Free(m.c); err != nil {
		t.Fatalf("Free(%#x) = %v, want nil", a, err)
	}
	delete(r.live, a)
	pos, _ := slices.BinarySearch(r.addrs, a)
	r.addrs = slices.Delete(r.addrs, pos, pos+1)
	if len(r.freed) == 16 {
		r.freed = r.freed[1:]
	}
	r.freed = append(r.freed, m.c)
}

// freeSlab frees every live chunk of one slab (New), or every other live
// chunk (Over).
func (r *runner) freeSlab(arg int) {
	var drop []uintptr
	lo, _ := r.p.Bounds()
	for i, a := range r.addrs {
		if r.cfg.over && i%2 == arg%2 || !r.cfg.over && int((a-lo)/uintptr(r.slab)) == arg%int(r.limit/int64(r.slab)) {
			drop = append(drop, a)
		}
	}
	for _, a := range drop {
		r.free(a)
	}
}

// probe frees something the pool did not hand out (or, in checked builds,
// a chunk freed already) and checks that the pool refuses it unchanged.
func (r *runner) probe(variant int) {
	t := r.t
	var b []byte
	want := []error{pool.ErrForeign}
	lo, hi := r.p.Bounds()
	var some []byte // a live chunk to compute addresses from
	if len(r.addrs) > 0 {
		some = r.live[r.addrs[len(r.addrs)/2]].c
	}
	switch variant {
	case 0:
		b = nil
	case 1:
		b = make([]byte, r.chunk)
	case 2: // interior of a live chunk
		if some == nil {
			return
		}
		b = some[1+len(r.addrs)%(r.chunk-1):]
	case 3: // the carving cursor: uncarved memory
		cur := r.p.Cursor()
		switch {
		case r.cfg.over && cur < hi:
			b = r.region[cur-heaptest.Addr(r.region):]
		case !r.cfg.over && some != nil && cur < hi:
			b = heaptest.At(some, int(cur)-int(heaptest.Addr(some)), r.chunk)
		default:
			return
		}
	case 4:
		c, err := r.other.Alloc()
		if err != nil {
			return
		}
		b = c
	case 5: // past the last whole chunk: a slab's tail, the region's end
		if r.cfg.over {
			pad := int(-heaptest.Addr(r.region) & uintptr(r.align-1))
			end := pad + (len(r.region)-pad)/r.stride*r.stride
			if end >= len(r.region) {
				return
			}
			b = r.region[end:]
		} else {
			usable := r.slab / r.stride * r.stride
			if some == nil || usable == r.slab {
				return
			}
			s := int(heaptest.Addr(some)-lo) / r.slab
			b = heaptest.At(some, s*r.slab+usable-int(heaptest.Addr(some)-lo), 1)
		}
	case 6: // a double free, which only checked builds detect
		if !invariants.Enabled {
			return
		}
		for _, c := range r.freed {
			if _, ok := r.live[heaptest.Addr(c)]; !ok {
				b = c
				want = []error{pool.ErrDoubleFree, pool.ErrForeign}
				break
			}
		}
		if b == nil {
			return
		}
	}
	before := r.p.Stats()
	err := r.p.Free(b)
	if !isAny(err, want) {
		t.Fatalf("Free(%#x) (probe %d) = %v, want one of %v", heaptest.Addr(b), variant, err, want)
	}
	// Resident is the kernel's count of the pages, which the pool does
	// not own alone: a pool over Go memory shares its pages with the Go
	// heap, and anything that writes to another object on one of them (an
	// allocation, the GC) makes the page resident.
	after := r.p.Stats()
	after.Resident, before.Resident = 0, 0
	if after != before {
		t.Fatalf("Stats() after a refused Free(%#x) (probe %d) = %+v, want unchanged %+v", heaptest.Addr(b), variant, after, before)
	}
}

// trim gives back the slabs without live chunks and checks that only
// those went.
func (r *runner) trim() {
	t := r.t
	before := r.p.Stats()
	n, err := r.p.Trim()
	if err != nil {
		t.Fatalf("Trim() = %v, want nil", err)
	}
	after := r.p.Stats()
	if r.cfg.over {
		if n != 0 || after != before {
			t.Fatalf("Trim() of a pool made by Over = %d, stats %+v, want 0 and unchanged %+v", n, after, before)
		}
		return
	}
	lo, _ := r.p.Bounds()
	used := map[uintptr]bool{}
	for _, a := range r.addrs {
		used[(a-lo)/uintptr(r.slab)] = true
	}
	if want := int64(before.Slabs-len(used)) * int64(r.slab); n != want || after.Slabs != len(used) {
		t.Fatalf("Trim() = %d, leaving %d slabs, want %d, leaving the %d slabs with live chunks", n, after.Slabs, want, len(used))
	}
	r.verifyAll("Trim")
}

// verify checks the pool's invariants and counts against the model.
func (r *runner) verify(step string) {
	t := r.t
	t.Helper()
	heaptest.MustCheck(t, r.p, step)
	st := checkStats(t, r.p)
	if st.InUse != int64(len(r.live)) || st.Quarantined != 0 {
		t.Fatalf("Stats() after %s = InUse %d, Quarantined %d, want %d live chunks, 0", step, st.InUse, st.Quarantined, len(r.live))
	}
	if st.ChunkSize != r.chunk || st.Stride != r.stride || st.Align != r.align {
		t.Fatalf("Stats() = ChunkSize %d, Stride %d, Align %d, want %d, %d, %d", st.ChunkSize, st.Stride, st.Align, r.chunk, r.stride, r.align)
	}
	if r.cfg.over {
		pad := int(-heaptest.Addr(r.region) & uintptr(r.align-1))
		if capacity := int64((len(r.region) - pad) / r.stride); st.Capacity != capacity || st.Slabs != 1 || st.Footprint != int64(len(r.region)) {
			t.Fatalf("Stats() after %s = Capacity %d, Slabs %d, Footprint %d, want %d, 1, %d", step, st.Capacity, st.Slabs, st.Footprint, capacity, len(r.region))
		}
		return
	}
	if st.SlabSize != r.slab || st.Footprint != int64(st.Slabs)*int64(r.slab) || st.Footprint > r.limit ||
		st.Capacity != int64(st.Slabs)*int64(r.slab/r.stride) {
		t.Fatalf("Stats() after %s = %+v, want SlabSize %d, Footprint = Slabs * SlabSize <= %d, Capacity = Slabs * %d",
			step, st, r.slab, r.limit, r.slab/r.stride)
	}
}

// verifyAll checks every live chunk's bytes as well.
func (r *runner) verifyAll(step string) {
	r.verify(step)
	for _, a := range r.addrs {
		m := r.live[a]
		if !r.p.Committed(m.c) {
			r.t.Fatalf("after %s: live chunk %#x is not committed", step, a)
		}
		if i := heaptest.Intact(m.c, m.id); i >= 0 {
			r.t.Fatalf("after %s: chunk %#x (id %d): byte %d = %#x, want %#x", step, a, m.id, i, m.c[i], heaptest.Pattern(m.id, i))
		}
	}
}
