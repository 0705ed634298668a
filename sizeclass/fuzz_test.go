package sizeclass_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/sizeclass"
)

// FuzzSizeclass runs random sequences of Alloc, Free, Realloc, Trim and
// misuse, decoded from the input, against a reference model: the live
// blocks by id, each filled with a pattern derived from its id. After
// every operation: live blocks lie inside the heap's memory, aligned as
// asked, overlapping no other, with len == cap == the size asked for; a
// block's bytes are intact when it is freed or reallocated (and all of
// them every 64 steps); Realloc moves a block exactly when its new size
// needs another class; a refused call changes nothing; the statistics
// add up to the model's; and the heap's invariant checker passes.
//
// Long runs: go test -run '^$' -fuzz FuzzSizeclass -fuzztime 2m ./sizeclass
// (and again with -tags carvecheck).
func FuzzSizeclass(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s.limit, s.ops)
	}
	f.Fuzz(func(t *testing.T, limit uint8, ops []byte) {
		runOps(t, limit, ops)
	})
}

// fuzzSeeds are inputs worth keeping; testdata/fuzz/FuzzSizeclass holds
// more.
var fuzzSeeds = []struct {
	limit uint8
	ops   []byte
}{
	{0, []byte{0, 5, 0, 1, 8, 0, 9, 0, 0, 0, 1, 0, 200, 0, 4, 3, 0}},
	// Allocate a few of several sizes, reallocate, free, trim.
	{3, []byte{0, 10, 1, 0, 8, 1, 100, 0, 0, 4, 2, 13, 1, 0, 0, 5, 0, 1, 3, 5, 1, 15, 255, 255, 7, 3, 1, 3, 0, 7}},
	// Large objects, then double frees of them.
	{6, []byte{0, 15, 0, 64, 8, 0, 15, 3, 3, 8, 3, 0, 6, 0, 0, 3, 0, 6, 0, 1, 7}},
	// A small limit, filled.
	{0, slices.Repeat([]byte{0, 14, 255, 255, 8}, 40)},
	// Alignments, each power of two.
	{5, []byte{0, 3, 9, 0, 1, 0, 3, 9, 0, 2, 0, 3, 9, 0, 4, 0, 3, 9, 0, 6, 0, 3, 9, 0, 12, 6, 1, 0, 6, 2, 0, 6, 3, 0}},
}

// The operations, the low three bits of an op byte.
const (
	opAlloc   = 0 // 0, 1, 2: allocate: size bytes, align byte
	opFree    = 3 // 3, 4: free the live block at index byte
	opRealloc = 5 // reallocate the live block at index byte to size bytes
	opMisuse  = 6 // variant byte: a call that must fail
	opTrim    = 7
)

// TestRandomOps runs the fuzz body over pseudo-random inputs from a fixed
// seed: a few by default, many with CARVE_LONG=1.
func TestRandomOps(t *testing.T) {
	heaptest.Inputs(t, 3, 4, heaptest.Count{Default: 40, Short: 5, Long: 2000}, func(r *rand.Rand) (string, func(t *testing.T)) {
		ops := make([]byte, 200+r.IntN(1000))
		for j := range ops {
			ops[j] = byte(r.Uint32())
		}
		limit := uint8(r.Uint32())
		return fmt.Sprintf("limit %d, ops %v", limit, ops), func(t *testing.T) { runOps(t, limit, ops) }
	})
}

// reader hands out the bytes of the input, zeros once it runs out.
type reader struct {
	b []byte
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) u16() int { return int(r.byte()) | int(r.byte())<<8 }

// size decodes a size from 1 B to 1 MiB, mostly small: the first byte
// picks the range, the next two the size within it (0 also happens).
func (r *reader) size() int {
	sel, v := r.byte(), r.u16()
	switch {
	case sel == 255:
		return 0
	case sel%16 < 10:
		return 1 + v%256
	case sel%16 < 13:
		return 1 + v%4096
	case sel%16 < 15:
		return 1 + (v<<3|int(sel>>4))%(64<<10)
	}
	return 1 + (v<<4|int(sel>>4))%(1<<20)
}

// align decodes an alignment: mostly 1 to 16, every power of two to 4096.
func (r *reader) align() int {
	a := r.byte()
	if a < 128 {
		return 1 << (a % 13)
	}
	return 1 << (a % 5)
}

// object is a live block of the model.
type object struct {
	id    int
	b     []byte
	align int
}

// model is the reference: the live blocks, in allocation order, and
// freed slices kept to try freeing again.
type model struct {
	t      *testing.T
	h      *sizeclass.Heap
	limit  int64
	live   []object
	freed  [][]byte
	nextID int
}

func runOps(t *testing.T, limitSel uint8, ops []byte) {
	limit := int64(1<<20) << (limitSel % 7) // 1 MiB to 64 MiB
	h, err := sizeclass.New(sizeclass.Limit(limit))
	if err != nil {
		t.Fatalf("New(Limit(%d)) = %v", limit, err)
	}
	defer h.Close()
	m := &model{t: t, h: h, limit: limit}
	r := &reader{b: ops}
	for step := 0; len(r.b) > 0 && step < 2000; step++ {
		switch k := r.byte() % 8; {
		case k <= 2:
			m.alloc(r.size(), r.align())
		case k <= 4:
			m.free(int(r.byte()))
		case k == opRealloc:
			m.realloc(int(r.byte()), r.size())
		case k == opMisuse:
			m.misuse(r.byte())
		case k == opTrim:
			before := checkStats(t, h)
			n, err := h.Trim()
			st := checkStats(t, h)
			if err != nil || n != before.Footprint-st.Footprint || st.Used != before.Used {
				t.Fatalf("Trim() = %d, %v: footprint %d -> %d, used %d -> %d", n, err, before.Footprint, st.Footprint, before.Used, st.Used)
			}
		}
		heaptest.MustCheck(t, h, "step "+strconv.Itoa(step))
		m.verifyStats()
		if step%64 == 63 {
			m.verifyAll()
		}
	}
	m.verifyAll()
	for len(m.live) > 0 {
		m.free(0)
	}
	if st := checkStats(t, h); st.Live != 0 || st.Used != 0 || st.LargeObjects != 0 {
		t.Fatalf("all freed: Stats() = %+v, large %d; want Live and Used 0", st.Stats, st.LargeObjects)
	}
}

// period returns two periods of object id's pattern.
func period(id int) []byte {
	p := make([]byte, 512)
	for i := range p {
		p[i] = heaptest.Pattern(id, i)
	}
	return p
}

func fillFrom(b []byte, id, from int) {
	p := period(id)
	for i := from; i < len(b); {
		i += copy(b[i:], p[i%256:i%256+256])
	}
}

// verify fails the test unless the first n bytes of o hold its pattern.
func (m *model) verify(o object, n int, when string) {
	p := period(o.id)
	for i := 0; i < n; i += 256 - i%256 {
		k := min(n-i, 256-i%256)
		if !bytes.Equal(o.b[i:i+k], p[i%256:i%256+k]) {
			for j := i; j < i+k; j++ {
				if o.b[j] != heaptest.Pattern(o.id, j) {
					m.t.Fatalf("%s: block %d (%#x, %d bytes): byte %d = %#x, want %#x", when, o.id, heaptest.Addr(o.b), len(o.b), j, o.b[j], heaptest.Pattern(o.id, j))
				}
			}
		}
	}
}

func (m *model) verifyAll() {
	for _, o := range m.live {
		m.verify(o, len(o.b), "intact")
	}
}

// place checks a block the heap just handed out for object o: inside
// the heap, aligned, overlapping no other live block.
func (m *model) place(o object, skip int) {
	b := o.b
	n, err := m.h.UsableSize(b)
	if err != nil || cap(b) != n || heaptest.Addr(b)%uintptr(o.align) != 0 || !m.h.Contains(b[:cap(b)]) {
		m.t.Fatalf("block %d at %#x: len %d cap %d, UsableSize %d (%v), inside the heap %v, want cap == UsableSize, aligned to %d, inside",
			o.id, heaptest.Addr(b), len(b), cap(b), n, err, m.h.Contains(b[:cap(b)]), o.align)
	}
	// The capacity is the caller's to write: it must not reach another block.
	lo, hi := heaptest.Addr(b), heaptest.Addr(b)+uintptr(cap(b))
	for i, other := range m.live {
		if i == skip {
			continue
		}
		olo, ohi := heaptest.Addr(other.b), heaptest.Addr(other.b)+uintptr(max(len(other.b), 1))
		if lo < ohi && olo < hi {
			m.t.Fatalf("block %d [%#x, %#x) overlaps block %d [%#x, %#x)", o.id, lo, hi, other.id, olo, ohi)
		}
	}
}

// usable is the size the heap must give a request: the class's size or
// the pages of a large object.
func usable(size, align int) int {
	if c := sizeclass.ClassOf(size, align); c != 0 {
		return c
	}
	return page(size)
}

func (m *model) alloc(size, align int) {
	before := m.h.Stats()
	b, err := m.h.Alloc(size, align)
	if err != nil {
		m.refused(before, err, "Alloc("+strconv.Itoa(size)+", "+strconv.Itoa(align)+")")
		m.exhausted(before, size, align, err)
		return
	}
	o := object{id: m.nextID, b: b, align: align}
	m.nextID++
	if n, err := m.h.UsableSize(b); err != nil || n != usable(size, align) {
		m.t.Fatalf("UsableSize(Alloc(%d, %d)) = %d, %v; want %d", size, align, n, err, usable(size, align))
	}
	m.place(o, -1)
	fillFrom(b, o.id, 0)
	m.live = append(m.live, o)
}

// exhausted checks that an ErrExhausted was due: the request needed a
// slab or a large object that would pass the limit.
func (m *model) exhausted(st sizeclass.Stats, size, align int, err error) {
	if !errors.Is(err, sizeclass.ErrExhausted) {
		m.t.Fatalf("Alloc(%d, %d) = %v, want nil or ErrExhausted", size, align, err)
	}
	need := int64(page(size))
	if c := sizeclass.ClassOf(size, align); c != 0 {
		for _, cs := range st.Classes {
			if cs.Size == c {
				if cs.Capacity-cs.InUse-cs.Quarantined > 0 {
					m.t.Fatalf("Alloc(%d, %d) = %v with %d chunks of %d bytes available", size, align, err, cs.Capacity-cs.InUse, c)
				}
				need = int64(cs.SlabSize)
			}
		}
	}
	if st.Footprint+need <= m.limit {
		m.t.Fatalf("Alloc(%d, %d) = %v with footprint %d + %d <= limit %d", size, align, err, st.Footprint, need, m.limit)
	}
}

// refused checks that a failed call left the heap as it was.
func (m *model) refused(before sizeclass.Stats, err error, call string) {
	m.t.Helper()
	if err == nil {
		m.t.Fatalf("%s succeeded, want an error", call)
	}
	if after := m.h.Stats(); !sameStats(before, after) {
		m.t.Fatalf("%s = %v changed the heap:\nbefore %+v\nafter  %+v", call, err, before.Stats, after.Stats)
	}
}

func (m *model) free(i int) {
	if len(m.live) == 0 {
		return
	}
	i %= len(m.live)
	o := m.live[i]
	m.verify(o, len(o.b), "Free")
	if err := m.h.Free(o.b); err != nil {
		m.t.Fatalf("Free(block %d at %#x) = %v", o.id, heaptest.Addr(o.b), err)
	}
	m.live = slices.Delete(m.live, i, i+1)
	if len(m.freed) < 64 {
		m.freed = append(m.freed, o.b)
	} else {
		m.freed[o.id%64] = o.b
	}
}

func (m *model) realloc(i, size int) {
	if len(m.live) == 0 {
		return
	}
	i %= len(m.live)
	o := m.live[i]
	m.verify(o, len(o.b), "Realloc")
	old, err := m.h.UsableSize(o.b)
	if err != nil {
		m.t.Fatalf("UsableSize(block %d) = %v", o.id, err)
	}
	var stays bool
	if old <= sizeclass.MaxClassSize {
		stays = sizeclass.ClassOf(size, 1) == old
	} else {
		stays = size > sizeclass.MaxClassSize && page(size) == old
	}
	before := m.h.Stats()
	b, err := m.h.Realloc(o.b, size)
	if err != nil {
		m.refused(before, err, "Realloc("+strconv.Itoa(size)+")")
		if !errors.Is(err, sizeclass.ErrExhausted) {
			m.t.Fatalf("Realloc(block %d, %d) = %v, want nil or ErrExhausted", o.id, size, err)
		}
		m.verify(o, len(o.b), "failed Realloc")
		return
	}
	if moved := heaptest.Addr(b) != heaptest.Addr(o.b); moved == stays {
		m.t.Fatalf("Realloc(block %d of %d bytes in %d, %d) moved = %v, want %v", o.id, len(o.b), old, size, moved, !stays)
	}
	if !stays {
		// A moved block keeps its class's alignment up to 16 bytes.
		o.align = min(16, old&-old)
		if m.h.Contains(o.b) {
			// The old block is free now: it may be handed out again.
			m.freed = append(m.freed[:min(len(m.freed), 63)], o.b)
		}
	}
	kept := min(len(o.b), size)
	o.b = b
	m.live[i] = o
	m.verify(o, kept, "after Realloc")
	m.place(o, i)
	fillFrom(b, o.id, kept)
}

// misuse makes a call that must fail and leave the heap unchanged.
func (m *model) misuse(variant byte) {
	before := m.h.Stats()
	switch variant % 6 {
	case 0: // a freed block, unless its address is live again
		if len(m.freed) == 0 {
			return
		}
		b := m.freed[int(variant)/6%len(m.freed)]
		if m.isLive(heaptest.Addr(b)) {
			return
		}
		err := m.h.Free(b)
		m.refused(before, err, "Free(freed block)")
		if !errors.Is(err, sizeclass.ErrDoubleFree) && !errors.Is(err, sizeclass.ErrForeign) {
			m.t.Fatalf("Free(freed block %#x) = %v, want ErrDoubleFree or ErrForeign", heaptest.Addr(b), err)
		}
		if _, err := m.h.Realloc(b, 10); !errors.Is(err, sizeclass.ErrDoubleFree) && !errors.Is(err, sizeclass.ErrForeign) {
			m.t.Fatalf("Realloc(freed block %#x) = %v, want ErrDoubleFree or ErrForeign", heaptest.Addr(b), err)
		}
	case 1: // inside a live block
		if len(m.live) == 0 {
			return
		}
		o := m.live[int(variant)/6%len(m.live)]
		if len(o.b) < 2 {
			return
		}
		in := sizeclass.At(o.b, 1+int(variant)%(len(o.b)-1), 1)
		if m.isLive(heaptest.Addr(in)) {
			return
		}
		err := m.h.Free(in)
		m.refused(before, err, "Free(inside a block)")
		if !errors.Is(err, sizeclass.ErrForeign) && !(len(o.b) > sizeclass.MaxClassSize && errors.Is(err, sizeclass.ErrDoubleFree)) {
			m.t.Fatalf("Free(inside block %d) = %v, want ErrForeign", o.id, err)
		}
	case 2: // Go memory
		err := m.h.Free(make([]byte, 8))
		m.refused(before, err, "Free(Go memory)")
		if !errors.Is(err, sizeclass.ErrForeign) {
			m.t.Fatalf("Free(Go memory) = %v, want ErrForeign", err)
		}
	case 3:
		_, err := m.h.Alloc(-1-int(variant), 8)
		m.refused(before, err, "Alloc(negative)")
		if !errors.Is(err, sizeclass.ErrSize) {
			m.t.Fatalf("Alloc(negative) = %v, want ErrSize", err)
		}
	case 4:
		align := []int{0, 3, 24, 8192, -8}[int(variant)/6%5]
		_, err := m.h.Alloc(8, align)
		m.refused(before, err, "Alloc(8, "+strconv.Itoa(align)+")")
		if !errors.Is(err, sizeclass.ErrAlign) {
			m.t.Fatalf("Alloc(8, %d) = %v, want ErrAlign", align, err)
		}
	case 5:
		if len(m.live) == 0 {
			return
		}
		o := m.live[int(variant)/6%len(m.live)]
		_, err := m.h.Realloc(o.b, -1)
		m.refused(before, err, "Realloc(negative)")
		if !errors.Is(err, sizeclass.ErrSize) {
			m.t.Fatalf("Realloc(block %d, -1) = %v, want ErrSize", o.id, err)
		}
	}
}

func (m *model) isLive(a uintptr) bool {
	for _, o := range m.live {
		if heaptest.Addr(o.b) == a {
			return true
		}
	}
	return false
}

// verifyStats compares the heap's statistics with the model's sums.
func (m *model) verifyStats() {
	st := checkStats(m.t, m.h)
	var live, used, large int64
	for _, o := range m.live {
		n, err := m.h.UsableSize(o.b)
		if err != nil {
			m.t.Fatalf("UsableSize(block %d) = %v", o.id, err)
		}
		live += int64(len(o.b))
		used += int64(n)
		if n > sizeclass.MaxClassSize {
			large++
		}
	}
	if st.Live != live || st.Used != used || st.LargeObjects != large || st.Footprint > m.limit {
		m.t.Fatalf("Stats() = %+v, %d large; model has Live %d, Used %d, %d large (limit %d)",
			st.Stats, st.LargeObjects, live, used, large, m.limit)
	}
}
