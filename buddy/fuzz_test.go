package buddy_test

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/carvelab/carve/buddy"
	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/mem"
)

// FuzzBuddy runs random sequences of Alloc, Free, Realloc, Trim and
// misuse, decoded from the input, against a reference model: the list of
// live objects with the block each must take. After every operation the
// blocks must lie inside the heap, aligned, apart from each other, with
// the bytes written into them; the statistics must match the model
// exactly (Live, Used, HeaderBytes, blocks per order, Footprint as the
// granules in use plus Idle); the split must have come from the smallest
// free order; and Check must pass.
//
// Long runs: go test -run '^$' -fuzz FuzzBuddy -fuzztime 2m ./buddy (and
// again with -tags carvecheck).
func FuzzBuddy(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s.cfg, s.ops)
	}
	f.Fuzz(func(t *testing.T, cfg uint32, ops []byte) {
		runOps(t, cfg, ops)
	})
}

// TestRandomOps runs the fuzz body over pseudo-random inputs from a fixed
// seed: a few by default, many with CARVE_LONG=1.
func TestRandomOps(t *testing.T) {
	heaptest.Inputs(t, 3, 4, heaptest.Count{Default: 24, Long: 2000}, func(r *rand.Rand) (string, func(t *testing.T)) {
		ops := make([]byte, 200+r.IntN(1200))
		for j := range ops {
			ops[j] = byte(r.Uint32())
		}
		cfg := r.Uint32()
		return fmt.Sprintf("cfg %#x, ops %q", cfg, ops), func(t *testing.T) { runOps(t, cfg, ops) }
	})
}

// The input's first word configures the heap:
//
//	bit 0       mode: Plain or Header
//	bits 1-4    limit: 1 to 16 MiB,
//	bits 5-7    plus 0 to 7 times 12 KiB (limits that are not powers of two)
//	bits 8-9    MinBlock: 16, 32, 64 or 16
//	bits 10-11  MaxBlock: the default, 256 KiB, 1 MiB or 4 MiB
//	bits 12-13  Granule: the default, a page, 4 pages or 16 pages
//	bits 14-15  Retain: 0, 256 KiB, the default or everything
//
// and the op bytes drive it. An op's low three bits are its kind:
//
//	0, 1, 2  alloc: 4 more bytes: the size (see fuzzSize; 31 in the op's
//	         high bits means size 0) in 3, the alignment's log in 1
//	3, 4     free: 1 more byte, which live object
//	5        realloc: 4 more bytes: which object, the size as for alloc
//	6        misuse: variant in the high bits (see probe)
//	7        Trim, or (bit 3 set) free every other live object
const (
	opFree    = 3
	opRealloc = 5
	opProbe   = 6
	opTrim    = 7
)

// fuzzSize decodes a size from 1 byte to 1 MiB, biased to small ones: the
// top six bits of logByte, v, give the log e = 20 v^2 / 63^2, and the
// 16-bit mantissa m the rest: 2^e + m 2^e / 2^16.
func fuzzSize(hi byte, logByte, m1, m2 int) int {
	if hi == 31 {
		return 0
	}
	v := logByte >> 2
	e := v * v * 20 / (63 * 63)
	return min(1<<e+(m1|m2<<8)<<e>>16, 1<<20)
}

// fuzzAlign decodes an alignment from 1 to 4096, biased to 16 and less.
func fuzzAlign(b int) int {
	if b %= 32; b > 12 {
		b %= 5
	}
	return 1 << b
}

// The seed builders: each returns the bytes of one op.

// sAlloc allocates about size bytes (exactly, up to 64 KiB) aligned to
// 1<<alignLog.
func sAlloc(size, alignLog int) []byte {
	if size == 0 {
		return []byte{31 << 3, 0, 0, 0, byte(alignLog)}
	}
	return append([]byte{0}, sSize(size, alignLog)...)
}

func sSize(size, alignLog int) []byte {
	e := bits.Len(uint(size)) - 1
	v := 0
	for v*v*20/(63*63) < e {
		v++
	}
	m := (size - 1<<e) << 16 >> e
	return []byte{byte(v << 2), byte(m), byte(m >> 8), byte(alignLog)}
}

func sFree(i int) []byte { return []byte{opFree, byte(i)} }

// sRealloc resizes live object i to about size bytes.
func sRealloc(i, size int) []byte {
	if size == 0 {
		return []byte{opRealloc | 31<<3, byte(i), 0, 0, 0}
	}
	return append([]byte{opRealloc, byte(i)}, sSize(size, 0)[:3]...)
}

func sProbe(variant int) []byte { return []byte{opProbe | byte(variant)<<3} }

var (
	sTrim     = []byte{opTrim}
	sFreeHalf = []byte{opTrim | 8}
)

// fuzzSeeds start the fuzzer on the interesting corners.
var fuzzSeeds = []struct {
	cfg uint32
	ops []byte
}{
	// Plain, 1 MiB: small requests, frees, a realloc chain, every probe.
	{0x0000, slices.Concat(sAlloc(16, 0), sAlloc(100, 3), sAlloc(1000, 0), sAlloc(0, 0), sFree(1),
		sRealloc(0, 300), sRealloc(0, 5000), sRealloc(0, 20), sFree(0), sProbe(0), sProbe(1), sProbe(2), sProbe(3),
		sProbe(4), sProbe(5), sProbe(6), sProbe(7), sProbe(8))},
	// Header, 2 MiB + 12 KiB, retain 0: exact powers of two, then half freed.
	{0x0023, slices.Concat(sAlloc(16, 0), sAlloc(64, 0), sAlloc(256, 4), sAlloc(1024, 0), sAlloc(4096, 12),
		sRealloc(1, 128), sRealloc(2, 4096), sFreeHalf, sAlloc(64, 0), sProbe(2), sProbe(7))},
	// Header, 1 MiB, max block 256 KiB: too large, alignments, Alloc(0).
	{0x0401, slices.Concat(sAlloc(300<<10, 0), sAlloc(0, 0), sAlloc(10, 12), sAlloc(10, 9), sAlloc(200<<10, 0),
		sRealloc(3, 250<<10), sRealloc(1, 1), sProbe(8))},
	// Plain, 2 MiB, page granule, min block 64, retain 0: big blocks,
	// exhaustion, trims, growth in place.
	{0x1202, slices.Concat(sAlloc(1<<20, 0), sAlloc(512<<10, 0), sAlloc(512<<10, 0), sAlloc(100, 0), sFree(1),
		sTrim, sRealloc(0, 2<<20), sFree(0), sRealloc(0, 1<<20), sAlloc(64<<10, 0), sFreeHalf)},
	// Header, retain everything: churn, then Trim.
	{0xc001, slices.Concat(sAlloc(100<<10, 0), sFree(0), sAlloc(50<<10, 0), sAlloc(100<<10, 0), sFree(0), sFree(0),
		sTrim, sAlloc(3000, 5), sTrim)},
}

// model is what the reference model knows of a live object.
type model struct {
	b     []byte
	id    int
	block int // bytes of its block
	d     int // the payload's distance from the block's start
}

// runner holds a heap under test and its reference model.
type runner struct {
	t        *testing.T
	h        *buddy.Heap
	other    *buddy.Heap // for blocks of another heap
	mode     buddy.Mode
	minBlock int
	maxBlock int
	granule  int
	retain   int64
	objs     []model  // live objects
	freed    [][]byte // recently freed slices, for double frees
	nextID   int
	step     string
}

func runOps(t *testing.T, cfg uint32, ops []byte) {
	r := &runner{t: t}
	r.mode = buddy.Mode(cfg & 1)
	limit := int64(1+cfg>>1%16)<<20 + int64(cfg>>5%8)*12<<10
	r.minBlock = []int{16, 32, 64, 16}[cfg>>8%4]
	opts := []buddy.Option{buddy.Limit(limit), buddy.MinBlock(r.minBlock)}
	if mb := []int{0, 256 << 10, 1 << 20, 4 << 20}[cfg>>10%4]; mb != 0 && int64(mb) <= limit {
		opts = append(opts, buddy.MaxBlock(mb))
	}
	ps := mem.PageSize()
	if g := []int{0, ps, 4 * ps, 16 * ps}[cfg>>12%4]; g != 0 {
		opts = append(opts, buddy.Granule(g))
	}
	r.retain = []int64{0, 256 << 10, buddy.DefaultRetain, 1 << 40}[cfg>>14%4]
	opts = append(opts, buddy.Retain(r.retain))
	h, err := buddy.New(r.mode, opts...)
	if err != nil {
		t.Fatalf("New(%v, cfg %#x) = %v, want nil", r.mode, cfg, err)
	}
	defer h.Close()
	r.h = h
	s := h.Stats()
	r.maxBlock, r.granule = s.MaxBlock, s.Granule
	if r.other, err = buddy.New(r.mode, buddy.Limit(1<<20)); err != nil {
		t.Fatalf("New = %v", err)
	}
	defer r.other.Close()
	r.verify("New")

	if len(ops) > 3000 {
		ops = ops[:3000]
	}
	for i := 0; i < len(ops); {
		op := ops[i]
		i++
		arg := func() int {
			if i < len(ops) {
				i++
				return int(ops[i-1])
			}
			return 0
		}
		r.step = fmt.Sprintf("op %d (%#x)", i-1, op)
		switch kind := op & 7; kind {
		case 0, 1, 2:
			size := fuzzSize(op>>3, arg(), arg(), arg())
			r.alloc(size, fuzzAlign(arg()))
		case opFree, opFree + 1:
			if len(r.objs) > 0 {
				r.free(arg() % len(r.objs))
			}
		case opRealloc:
			j := arg()
			size := fuzzSize(op>>3, arg(), arg(), arg())
			if len(r.objs) > 0 {
				r.realloc(j%len(r.objs), size)
			}
		case opProbe:
			r.probe(int(op>>3) % 9)
		case opTrim:
			if op&8 == 0 {
				r.trim()
			} else {
				for j := len(r.objs) - 1; j >= 0; j -= 2 {
					r.free(j)
				}
			}
		}
		r.verify(r.step)
		if i%64 == 0 {
			r.verifyContents()
		}
	}
	r.verifyContents()
	if err := h.Close(); err != nil {
		t.Fatalf("Close() = %v, want nil", err)
	}
	if _, err := h.Alloc(1, 1); !errors.Is(err, buddy.ErrClosed) {
		t.Fatalf("Alloc after Close = %v, want %v", err, buddy.ErrClosed)
	}
	if len(r.objs) > 0 {
		if err := h.Free(r.objs[0].b); !errors.Is(err, buddy.ErrClosed) {
			t.Fatalf("Free after Close = %v, want %v", err, buddy.ErrClosed)
		}
	}
}

// need returns the block a request takes and its payload distance, or 0
// if no block is large enough.
func (r *runner) need(size, align int) (block, d int) {
	if r.mode == buddy.Header {
		d = max(buddy.HeaderSize, align)
	}
	block = blockOf(r.mode, size, align, r.minBlock)
	if block > r.maxBlock {
		return 0, d
	}
	return block, d
}

// alloc allocates, checks the block against the model and fills it.
func (r *runner) alloc(size, align int) {
	t := r.t
	block, d := r.need(size, align)
	before := r.h.Stats()
	b, err := r.h.Alloc(size, align)
	if err != nil {
		if b != nil {
			t.Fatalf("%s: Alloc(%d, %d) = %#x, %v, want nil with the error", r.step, size, align, heaptest.Addr(b), err)
		}
		r.refused("Alloc", err, before)
		switch {
		case block == 0:
			if !errors.Is(err, buddy.ErrSize) || !errors.Is(err, buddy.ErrExhausted) {
				t.Fatalf("%s: Alloc(%d, %d) = %v, want %v and %v (larger than %d)", r.step, size, align, err, buddy.ErrSize, buddy.ErrExhausted, r.maxBlock)
			}
		case !errors.Is(err, buddy.ErrExhausted):
			t.Fatalf("%s: Alloc(%d, %d) = %v, want nil or %v", r.step, size, align, err, buddy.ErrExhausted)
		default:
			k := bits.TrailingZeros(uint(block))
			for j := k; j <= buddy.MaxOrder; j++ {
				if before.FreeByOrder[j] > 0 {
					t.Fatalf("%s: Alloc(%d, %d) = %v with %d free blocks of order %d >= %d", r.step, size, align, err, before.FreeByOrder[j], j, k)
				}
			}
		}
		return
	}
	if block == 0 {
		t.Fatalf("%s: Alloc(%d, %d) succeeded, larger than MaxBlock %d", r.step, size, align, r.maxBlock)
	}
	if len(b) != size || cap(b) != size || heaptest.Addr(b)%uintptr(align) != 0 {
		t.Fatalf("%s: Alloc(%d, %d) = %#x len %d cap %d, want aligned, len == cap == size", r.step, size, align, heaptest.Addr(b), len(b), cap(b))
	}
	r.checkSplit(before, block)
	r.add(model{b: b, block: block, d: d})
}

// checkSplit verifies that a block of the given size came from the
// smallest free order that holds it: that order lost a block, and each
// order between gained one, the upper halves split off.
func (r *runner) checkSplit(before buddy.Stats, block int) {
	after := r.h.Stats()
	k := bits.TrailingZeros(uint(block))
	j := k
	for j <= buddy.MaxOrder && before.FreeByOrder[j] == 0 {
		j++
	}
	want := before.FreeByOrder
	want[j]--
	for i := k; i < j; i++ {
		want[i]++
	}
	if after.FreeByOrder != want {
		r.t.Fatalf("%s: a block of %d bytes took free blocks %v to %v, want %v (split from order %d)",
			r.step, block, before.FreeByOrder, after.FreeByOrder, want, j)
	}
}

// add checks a new block against the model's live ones and records it.
func (r *runner) add(m model) {
	t := r.t
	lo, hi := r.h.Bounds()
	start := heaptest.Addr(m.b) - uintptr(m.d)
	if start < lo || start+uintptr(m.block) > hi || (start-lo)%uintptr(m.block) != 0 {
		t.Fatalf("%s: block [%#x, +%d) outside the heap [%#x, %#x) or not aligned to its size", r.step, start, m.block, lo, hi)
	}
	if !r.h.Committed(m.b) {
		t.Fatalf("%s: block at %#x is not committed", r.step, start)
	}
	for _, o := range r.objs {
		os := heaptest.Addr(o.b) - uintptr(o.d)
		if start < os+uintptr(o.block) && os < start+uintptr(m.block) {
			t.Fatalf("%s: block [%#x, +%d) overlaps the live block [%#x, +%d)", r.step, start, m.block, os, o.block)
		}
	}
	if n, err := r.h.UsableSize(m.b); n != m.block-m.d || err != nil {
		t.Fatalf("%s: UsableSize = %d, %v, want %d", r.step, n, err, m.block-m.d)
	}
	m.id = r.nextID
	r.nextID++
	heaptest.Fill(m.b, m.id)
	r.objs = append(r.objs, m)
}

// free checks that object j kept its bytes, then frees it.
func (r *runner) free(j int) {
	t := r.t
	o := r.objs[j]
	if i := heaptest.Intact(o.b, o.id); i >= 0 {
		t.Fatalf("%s: object %d at %#x lost byte %d", r.step, o.id, heaptest.Addr(o.b), i)
	}
	if err := r.h.Free(o.b); err != nil {
		t.Fatalf("%s: Free(%#x) = %v, want nil", r.step, heaptest.Addr(o.b), err)
	}
	r.objs = slices.Delete(r.objs, j, j+1)
	r.forget(o.b)
}

// forget keeps a freed slice for the double-free probes.
func (r *runner) forget(b []byte) {
	if len(r.freed) == 16 {
		r.freed = r.freed[1:]
	}
	r.freed = append(r.freed, b)
}

// realloc resizes object j and checks where it went.
func (r *runner) realloc(j, size int) {
	t := r.t
	o := r.objs[j]
	if i := heaptest.Intact(o.b, o.id); i >= 0 {
		t.Fatalf("%s: object %d at %#x lost byte %d", r.step, o.id, heaptest.Addr(o.b), i)
	}
	before := r.h.Stats()
	inPlace := blockOf(r.mode, size, 1, r.minBlock)
	if r.mode == buddy.Header {
		inPlace = max(r.minBlock, 1<<bits.Len(uint(o.d+max(size, 1)-1)))
	}
	b, err := r.h.Realloc(o.b, size)
	if err != nil {
		r.refused("Realloc", err, before)
		if !errors.Is(err, buddy.ErrExhausted) {
			t.Fatalf("%s: Realloc(%d bytes, %d) = %v, want nil or %v", r.step, len(o.b), size, err, buddy.ErrExhausted)
		}
		if inPlace <= o.block {
			t.Fatalf("%s: Realloc(%d bytes, %d) = %v, but it fits in place", r.step, len(o.b), size, err)
		}
		return
	}
	if len(b) != size || cap(b) != size || heaptest.Addr(b)%16 != 0 {
		t.Fatalf("%s: Realloc = %#x len %d cap %d, want 16-aligned, len == cap == %d", r.step, heaptest.Addr(b), len(b), cap(b), size)
	}
	if i := heaptest.Intact(b[:min(size, len(o.b))], o.id); i >= 0 {
		t.Fatalf("%s: Realloc(%d bytes, %d) lost byte %d", r.step, len(o.b), size, i)
	}
	r.objs = slices.Delete(r.objs, j, j+1)
	m := model{b: b, block: inPlace, d: o.d}
	if heaptest.Addr(b) != heaptest.Addr(o.b) {
		if inPlace <= o.block {
			t.Fatalf("%s: Realloc(%d bytes, %d) moved a block that fits in place", r.step, len(o.b), size)
		}
		m.block, m.d = r.need(size, 16) // a moved block is 16-aligned
		r.forget(o.b)
	}
	r.add(m)
}

// refused checks that a failed call left the statistics as they were.
func (r *runner) refused(op string, err error, before buddy.Stats) {
	if after := r.h.Stats(); after != before {
		r.t.Fatalf("%s: %s failed (%v) but changed the stats from %+v to %+v", r.step, op, err, before, after)
	}
}

// probe hands the heap what it did not hand out, or no longer owns, and
// checks that it refuses it unchanged.
func (r *runner) probe(variant int) {
	var b []byte
	want := []error{buddy.ErrForeign}
	var some []byte
	if len(r.objs) > 0 {
		some = r.objs[len(r.objs)/2].b
	}
	switch variant {
	case 0:
		b = nil
	case 1:
		b = make([]byte, 64)
	case 2, 3: // inside a live block: 16 bytes or 1 byte in
		if some == nil {
			return
		}
		b = heaptest.At(some, 1+15*(variant-2), 1)
		want = append(want, buddy.ErrDoubleFree) // past a short payload, in a free block
	case 4:
		c, err := r.other.Alloc(100, 1)
		if err != nil {
			return
		}
		b = c
	case 5, 6: // a slice freed already: the oldest kept, or the last
		if len(r.freed) == 0 {
			return
		}
		b = r.freed[(len(r.freed)-1)*(variant-5)]
		want = append(want, buddy.ErrDoubleFree)
	case 7: // 16 bytes before a payload
		if some == nil {
			return
		}
		b = heaptest.At(some, -16, 1)
		want = append(want, buddy.ErrDoubleFree)
	case 8: // at the block's end
		if some == nil {
			return
		}
		o := r.objs[len(r.objs)/2]
		b = heaptest.At(some, o.block-o.d, 1)
		want = append(want, buddy.ErrDoubleFree)
	}
	for _, o := range r.objs {
		if heaptest.Addr(o.b) == heaptest.Addr(b) {
			return // a live payload: the heap cannot tell, and must not
		}
	}
	before := r.h.Stats()
	err := r.h.Free(b)
	_, rerr := r.h.Realloc(b, 10)
	_, uerr := r.h.UsableSize(b)
	for _, e := range []error{err, rerr, uerr} {
		if !isAny(e, want...) {
			r.t.Fatalf("%s: probe %d at %#x: Free, Realloc, UsableSize = %v, %v, %v, want one of %v", r.step, variant, heaptest.Addr(b), err, rerr, uerr, want)
		}
	}
	r.refused(fmt.Sprintf("probe %d", variant), err, before)
}

// trim gives back every idle granule.
func (r *runner) trim() {
	before := r.h.Stats()
	n, err := r.h.Trim()
	if err != nil || n != before.Idle {
		r.t.Fatalf("%s: Trim() = %d, %v, want the idle %d, nil", r.step, n, err, before.Idle)
	}
	if after := r.h.Stats(); after.Idle != 0 || after.Footprint != before.Footprint-n {
		r.t.Fatalf("%s: Stats() after Trim = Idle %d, Footprint %d, want 0, %d", r.step, after.Idle, after.Footprint, before.Footprint-n)
	}
}

// verify checks the heap's invariants and statistics against the model.
func (r *runner) verify(step string) {
	t := r.t
	t.Helper()
	mustCheck(t, r.h, step)
	s := checkStats(t, r.h)
	var live, used, headers int64
	var byOrder [buddy.MaxOrder + 1]int64
	granules := map[uintptr]bool{}
	lo, _ := r.h.Bounds()
	for _, o := range r.objs {
		live += int64(len(o.b))
		used += int64(o.block)
		headers += int64(o.d)
		byOrder[bits.TrailingZeros(uint(o.block))]++
		start := heaptest.Addr(o.b) - uintptr(o.d) - lo
		for g := start / uintptr(r.granule); g <= (start+uintptr(o.block)-1)/uintptr(r.granule); g++ {
			granules[g] = true
		}
	}
	if s.Live != live || s.Used != used || s.HeaderBytes != headers || s.LiveByOrder != byOrder {
		t.Fatalf("%s: Stats() = Live %d, Used %d, HeaderBytes %d, LiveByOrder %v; want %d, %d, %d, %v",
			step, s.Live, s.Used, s.HeaderBytes, s.LiveByOrder, live, used, headers, byOrder)
	}
	if want := int64(len(granules))*int64(r.granule) + s.Idle; s.Footprint != want || s.Idle > r.retain {
		t.Fatalf("%s: Stats() = Footprint %d, Idle %d, want %d granules of %d in use plus Idle, Idle <= Retain %d",
			step, s.Footprint, s.Idle, len(granules), r.granule, r.retain)
	}
}

// verifyContents checks every live object's bytes.
func (r *runner) verifyContents() {
	for _, o := range r.objs {
		if i := heaptest.Intact(o.b, o.id); i >= 0 {
			r.t.Fatalf("%s: object %d at %#x lost byte %d", r.step, o.id, heaptest.Addr(o.b), i)
		}
	}
}
