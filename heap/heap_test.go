package heap_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/carvelab/carve/heap"
	"github.com/carvelab/carve/internal/heaptest"
)

func TestNewOptions(t *testing.T) {
	// Where the zones are Go memory, taken whole at New, New refuses a
	// limit above 1 GiB rather than have the runtime fail fatally.
	var largestLimitErr error
	if !heap.CanPurge() {
		largestLimitErr = heap.ErrOption
	}
	tests := []struct {
		name string
		opts []heap.Option
		want error
	}{
		{"defaults", nil, nil},
		{"limit", []heap.Option{heap.Limit(1 << 20)}, nil},
		{"smallest limit", []heap.Option{heap.Limit(8 << 10)}, nil},
		{"largest limit", []heap.Option{heap.Limit(heap.MaxLimit)}, largestLimitErr},
		{"retain 0", []heap.Option{heap.Retain(0)}, nil},
		{"limit too small", []heap.Option{heap.Limit(4096)}, heap.ErrOption},
		{"limit too large", []heap.Option{heap.Limit(heap.MaxLimit + 1)}, heap.ErrOption},
		{"negative retain", []heap.Option{heap.Retain(-1)}, heap.ErrOption},
		{"retain above the limit", []heap.Option{heap.Limit(1 << 20), heap.Retain(2 << 20)}, heap.ErrOption},
		{"zero option", []heap.Option{{}}, heap.ErrOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := heap.New(tt.opts...)
			if !errors.Is(err, tt.want) || (err == nil) != (h != nil) {
				t.Fatalf("New() = %v, %v, want a heap or nil and %v", h, err, tt.want)
			}
			if h != nil {
				heaptest.MustCheck(t, h, "New")
				if err := h.Close(); err != nil {
					t.Fatalf("Close() = %v", err)
				}
			}
		})
	}
}

func TestDefaultLimit(t *testing.T) {
	h := newHeap(t)
	if l := h.Limit(); l != heap.DefaultLimit() || l < 8<<10 || l > heap.MaxLimit {
		t.Fatalf("Limit() = %d, DefaultLimit() = %d, want them equal, from 8 KiB to %d", l, heap.DefaultLimit(), int64(heap.MaxLimit))
	}
}

// TestAlloc checks where requests land and what they cost.
func TestAlloc(t *testing.T) {
	tests := []struct {
		size, align int
		small       bool // a slot of a size class
		usable      int  // UsableSize
	}{
		{0, 1, true, 8},
		{0, 0, true, 8}, // alignment 0: the default, as 1
		{1, 1, true, 8},
		{8, 8, true, 8},
		{9, 1, true, 16},
		{24, 1, true, 24},
		{24, 16, true, 32}, // 24 is 8-aligned: the first class aligned to 16
		{24, 64, true, 64},
		{24, 0, true, 24},
		{100, 1, true, 104},
		{129, 1, true, 136},
		{200, 1, true, 200},
		{208, 1, true, 208},
		{209, 1, true, 224},
		{256, 1, true, 256},
		{256, 256, true, 256},
		{200, 512, false, 200}, // no class is aligned to 512: a block of 208 bytes
		{257, 1, false, 264},   // 257 + 8 rounded up to 16, less the header
		{1000, 1, false, 1000},
		{1000, 0, false, 1000},
		{1001, 1, false, 1016},
		{500, 1, false, 504},
		{505, 1, true, 512}, // the exact class of 512: a best-fit block would take 528
		{1020, 1, true, 1024},
		{1024, 2048, false, 1032}, // the 1024 class is not aligned to 2048
		{2047, 1, true, 2048},
		{4089, 1, true, 4096},
		{4096, 4096, true, 4096},
		{4088, 1, false, 4088},
		{4097, 1, false, 4104},
		{1 << 20, 1, false, 1<<20 + 8},
	}
	h := newHeap(t)
	var live int64
	for _, tt := range tests {
		b, err := h.Alloc(tt.size, tt.align)
		if err != nil || len(b) != tt.size || cap(b) != tt.size || b == nil {
			t.Fatalf("Alloc(%d, %d) = len %d cap %d, %v; want len == cap == %d, nil", tt.size, tt.align, len(b), cap(b), err, tt.size)
		}
		if heaptest.Addr(b)%uintptr(max(tt.align, 8)) != 0 {
			t.Fatalf("Alloc(%d, %d) = %#x, not aligned", tt.size, tt.align, heaptest.Addr(b))
		}
		slo, shi, mlo, mhi := h.Zones()
		if small := heaptest.Addr(b) >= slo && heaptest.Addr(b) < shi; small != tt.small || !small && (heaptest.Addr(b) < mlo || heaptest.Addr(b) >= mhi) {
			t.Fatalf("Alloc(%d, %d) = %#x: in the small zone %t, want %t", tt.size, tt.align, heaptest.Addr(b), small, tt.small)
		}
		if u, err := h.UsableSize(b); u != tt.usable || err != nil {
			t.Fatalf("UsableSize(Alloc(%d, %d)) = %d, %v, want %d, nil", tt.size, tt.align, u, err, tt.usable)
		}
		live += int64(tt.size)
		heaptest.Fill(b, tt.size)
		heaptest.MustCheck(t, h, "Alloc")
		if st := checkStats(t, h); st.Live != live {
			t.Fatalf("Stats().Live = %d, want %d", st.Live, live)
		}
	}
}

// TestSlots checks that a class's slots are packed: consecutive requests
// of one size land a slot apart, lowest first, and a freed slot is the next
// one handed out.
func TestSlots(t *testing.T) {
	h := newHeap(t)
	var bs [][]byte
	for i := range 10 {
		b, err := h.Alloc(40, 1)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && heaptest.Addr(b) != heaptest.Addr(bs[i-1])+40 {
			t.Fatalf("Alloc(40) #%d = %#x, want %#x, one slot after the last", i, heaptest.Addr(b), heaptest.Addr(bs[i-1])+40)
		}
		bs = append(bs, b)
	}
	for _, i := range []int{7, 2, 5} {
		if err := h.Free(bs[i]); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []int{2, 5, 7} {
		b, err := h.Alloc(33, 1)
		if err != nil || heaptest.Addr(b) != heaptest.Addr(bs[want]) {
			t.Fatalf("Alloc(33) = %#x, %v, want the lowest free slot %#x", heaptest.Addr(b), err, heaptest.Addr(bs[want]))
		}
	}
	heaptest.MustCheck(t, h, "reuse")
}

// TestSlabsGiveBack checks that, with Retain(0), which keeps no empty
// slab, a slab whose slots are all freed gives its page back, and the
// page goes to the OS.
func TestSlabsGiveBack(t *testing.T) {
	h := newHeap(t, heap.Retain(0))
	var bs [][]byte
	for range 4 * 4096 / 64 { // four slabs of 64-byte slots
		b, err := h.Alloc(64, 1)
		if err != nil {
			t.Fatal(err)
		}
		heaptest.Fill(b, 1)
		bs = append(bs, b)
	}
	if st := checkStats(t, h); st.Slabs != 4 || st.Footprint != 4*4096 || st.Resident != 4*4096 {
		t.Fatalf("Stats() = %d slabs, footprint %d, resident %d, want 4 slabs, 16 KiB of each", st.Slabs, st.Footprint, st.Resident)
	}
	for _, b := range bs[64:] { // the last three slabs
		if err := h.Free(b); err != nil {
			t.Fatal(err)
		}
	}
	heaptest.MustCheck(t, h, "freeing three slabs")
	if st := checkStats(t, h); st.Slabs != 1 || st.Footprint != 4096 || st.Resident != 4096 || st.Purges == 0 {
		t.Fatalf("Stats() = %d slabs, footprint %d, resident %d, %d purges, want 1 slab, 4 KiB of each, the rest purged", st.Slabs, st.Footprint, st.Resident, st.Purges)
	}
}

// TestSlabsRefill is the block-allocator article's connection scenario in
// the small zone: 1 KiB buffers and 64-byte sessions allocated in turn,
// every buffer freed (its slabs given back), then as many buffers again.
// The heap must end where it was after the setup, its side metadata
// included: the bitmaps of freed slabs are reused, and the list of them
// costs nothing of its own.
func TestSlabsRefill(t *testing.T) {
	h := newHeap(t)
	const n = 20000
	bufs := make([][]byte, n)
	alloc := func(size int) []byte {
		b, err := h.Alloc(size, 8)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for i := range bufs {
		bufs[i] = alloc(1024)
		alloc(64)
	}
	setup := checkStats(t, h)
	for _, b := range bufs {
		if err := h.Free(b); err != nil {
			t.Fatal(err)
		}
	}
	heaptest.MustCheck(t, h, "freeing the buffers")
	if st := checkStats(t, h); st.Footprint >= setup.Footprint/4 {
		t.Errorf("after freeing the buffers the footprint is %d of the setup's %d: their slabs were not given back", st.Footprint, setup.Footprint)
	}
	for i := range bufs {
		bufs[i] = alloc(1024)
	}
	heaptest.MustCheck(t, h, "the buffers again")
	again := checkStats(t, h)
	if again.Footprint != setup.Footprint || again.Metadata != setup.Metadata {
		t.Errorf("the buffers again: footprint %d, metadata %d; after the setup %d and %d: the refill grew the heap",
			again.Footprint, again.Metadata, setup.Footprint, setup.Metadata)
	}
}

// TestHolesGiveBack checks that the whole pages inside a free best-fit
// block go back to the OS though the block is far from the top, and come
// back when the block is used again.
func TestHolesGiveBack(t *testing.T) {
	h := newHeap(t, heap.Retain(0))
	a, _ := h.Alloc(1000, 1)
	big, _ := h.Alloc(256<<10, 1)
	c, _ := h.Alloc(1000, 1)
	heaptest.Fill(a, 1)
	heaptest.Fill(big, 2)
	heaptest.Fill(c, 3)
	before := checkStats(t, h)
	if err := h.Free(big); err != nil {
		t.Fatal(err)
	}
	heaptest.MustCheck(t, h, "Free")
	st := checkStats(t, h)
	if gone := before.Resident - st.Resident; gone < 256<<10-2*4096 || st.Dirty != 0 {
		t.Fatalf("Free of a 256 KiB block between two live ones gave back %d resident bytes, %d dirty left; want at least 256 KiB less two pages, none", gone, st.Dirty)
	}
	if heaptest.Intact(a, 1) >= 0 || heaptest.Intact(c, 3) >= 0 {
		t.Fatal("the neighbours of a purged block lost their bytes")
	}
	again, err := h.Alloc(200<<10, 1)
	if err != nil || heaptest.Addr(again) != heaptest.Addr(big) {
		t.Fatalf("Alloc(200 KiB) = %#x, %v, want the hole at %#x", heaptest.Addr(again), err, heaptest.Addr(big))
	}
	heaptest.Fill(again, 4)
	heaptest.MustCheck(t, h, "reuse")
	if heaptest.Intact(again, 4) >= 0 {
		t.Fatal("a block on purged pages does not keep its bytes")
	}
}

// TestRetain checks that up to Retain bytes of free pages stay resident,
// and Trim gives them back.
func TestRetain(t *testing.T) {
	h := newHeap(t, heap.Retain(64<<10))
	a, _ := h.Alloc(1000, 1)
	b, _ := h.Alloc(32<<10, 1)
	c, _ := h.Alloc(1000, 1)
	heaptest.Fill(b, 1)
	_, _ = a, c
	if err := h.Free(b); err != nil {
		t.Fatal(err)
	}
	st := checkStats(t, h)
	if st.Dirty < 28<<10 || st.Purges != 0 {
		t.Fatalf("after freeing 32 KiB with a Retain of 64 KiB: %d bytes dirty, %d purges; want its inner pages kept", st.Dirty, st.Purges)
	}
	n, err := h.Trim()
	after := checkStats(t, h)
	if err != nil || n != st.Dirty || after.Dirty != 0 || after.Footprint != st.Footprint-n {
		t.Fatalf("Trim() = %d, %v, then dirty %d, footprint %d; want %d, nil, 0, %d", n, err, after.Dirty, after.Footprint, st.Dirty, st.Footprint-st.Dirty)
	}
	heaptest.MustCheck(t, h, "Trim")
}

// TestRealloc checks where Realloc keeps a block and where it moves it.
func TestRealloc(t *testing.T) {
	h := newHeap(t)
	tests := []struct {
		name     string
		from, to int
		setup    func() // run after the block is made
		inPlace  bool
	}{
		{"slot within its class", 100, 103, nil, true},
		{"slot to a smaller class", 100, 20, nil, false},
		{"slot to a larger class", 100, 200, nil, false},
		{"slot to a best-fit block", 100, 3000, nil, false},
		{"block shrinks", 3000, 1000, nil, true},
		{"block to a slot's size stays", 3000, 20, nil, true},
		{"block grows at the top", 3000, 9000, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := h.Alloc(tt.from, 1)
			if err != nil {
				t.Fatal(err)
			}
			heaptest.Fill(b, 7)
			n, err := h.Realloc(b, tt.to)
			if err != nil || len(n) != tt.to || cap(n) != tt.to {
				t.Fatalf("Realloc(%d -> %d) = len %d cap %d, %v", tt.from, tt.to, len(n), cap(n), err)
			}
			if moved := heaptest.Addr(n) != heaptest.Addr(b); moved == tt.inPlace {
				t.Fatalf("Realloc(%d -> %d) moved %t, want %t", tt.from, tt.to, moved, !tt.inPlace)
			}
			if i := heaptest.Intact(n[:min(tt.from, tt.to)], 7); i >= 0 {
				t.Fatalf("Realloc(%d -> %d) lost byte %d", tt.from, tt.to, i)
			}
			heaptest.MustCheck(t, h, "Realloc")
			if err := h.Free(n); err != nil {
				t.Fatal(err)
			}
		})
	}
	// Into the free block after it.
	a, _ := h.Alloc(2000, 1)
	next, _ := h.Alloc(5000, 1)
	guard, _ := h.Alloc(300, 1)
	h.Free(next)
	heaptest.Fill(a, 9)
	n, err := h.Realloc(a, 6000)
	if err != nil || heaptest.Addr(n) != heaptest.Addr(a) || heaptest.Intact(n[:2000], 9) >= 0 {
		t.Fatalf("Realloc into the free block after = %#x, %v, want in place at %#x, bytes kept", heaptest.Addr(n), err, heaptest.Addr(a))
	}
	heaptest.MustCheck(t, h, "Realloc into the next block")
	h.Free(n)
	h.Free(guard)
	if st := checkStats(t, h); st.Live != 0 || st.Used != 0 {
		t.Fatalf("Stats() after freeing everything = Live %d, Used %d", st.Live, st.Used)
	}
}

// TestMisuse checks that every kind of slice Free must refuse is refused
// with its sentinel error, by Free, Realloc and UsableSize, and changes
// nothing.
func TestMisuse(t *testing.T) {
	h := newHeap(t)
	other := newHeap(t)
	slot, _ := h.Alloc(48, 1)
	block, _ := h.Alloc(3000, 1)
	freedSlot, _ := h.Alloc(48, 1)
	freedBlock, _ := h.Alloc(3000, 1)
	keep, _ := h.Alloc(300, 1) // keeps freedBlock off the top
	h.Free(freedSlot)
	h.Free(freedBlock)
	foreign, _ := other.Alloc(48, 1)
	slo, shi, mlo, _ := h.Zones()
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"nil", nil, heap.ErrForeign},
		{"Go memory", make([]byte, 64), heap.ErrForeign},
		{"another heap's slot", foreign, heap.ErrForeign},
		{"inside a slot", heaptest.At(slot, 8, 8), heap.ErrForeign},
		{"inside a block", heaptest.At(block, 16, 8), heap.ErrForeign},
		{"off the granule", heaptest.At(block, 1, 8), heap.ErrForeign},
		{"a slot freed", freedSlot, heap.ErrDoubleFree},
		{"a block freed", freedBlock, heap.ErrDoubleFree},
		{"inside a free block", heaptest.At(freedBlock, 64, 8), heap.ErrDoubleFree},
		{"the top", h.At(mlo+uintptr(h.TopOffset()), 8), heap.ErrDoubleFree},
		{"a free page of the small zone", h.At(slo+uintptr(h.SmallCommitted())-heap.PageSize, 8), heap.ErrDoubleFree},
		{"past the small zone's pages", h.At(shi-64, 8), heap.ErrForeign},
		{"the best-fit zone's first word", h.At(mlo, 8), heap.ErrForeign},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := h.Stats()
			if err := h.Free(tt.b); !errors.Is(err, tt.want) {
				t.Fatalf("Free = %v, want %v", err, tt.want)
			}
			if n, err := h.Realloc(tt.b, 10); n != nil || !errors.Is(err, tt.want) {
				t.Fatalf("Realloc = %#x, %v, want nil, %v", heaptest.Addr(n), err, tt.want)
			}
			if n, err := h.UsableSize(tt.b); n != 0 || !errors.Is(err, tt.want) {
				t.Fatalf("UsableSize = %d, %v, want 0, %v", n, err, tt.want)
			}
			if after := h.Stats(); after.Stats != before.Stats || after.Slots != before.Slots || after.Blocks != before.Blocks {
				t.Fatalf("Stats() went from %+v to %+v", before.Stats, after.Stats)
			}
			heaptest.MustCheck(t, h, tt.name)
		})
	}
	for _, b := range [][]byte{slot, block, keep} {
		if err := h.Free(b); err != nil {
			t.Fatalf("Free of a live block after the misuse = %v", err)
		}
	}
}

// TestBadArguments checks Alloc's and Realloc's refusals.
func TestBadArguments(t *testing.T) {
	h := newHeap(t, heap.Limit(1<<20))
	b, _ := h.Alloc(10, 1)
	tests := []struct {
		name string
		call func() ([]byte, error)
		want error
	}{
		{"negative size", func() ([]byte, error) { return h.Alloc(-1, 1) }, heap.ErrSize},
		{"negative alignment", func() ([]byte, error) { return h.Alloc(8, -8) }, heap.ErrAlign},
		{"alignment 3", func() ([]byte, error) { return h.Alloc(8, 3) }, heap.ErrAlign},
		{"alignment too large", func() ([]byte, error) { return h.Alloc(8, 2*heap.MaxAlign) }, heap.ErrAlign},
		{"above the limit", func() ([]byte, error) { return h.Alloc(2<<20, 1) }, heap.ErrExhausted},
		{"Realloc negative", func() ([]byte, error) { return h.Realloc(b, -5) }, heap.ErrSize},
		{"Realloc above the limit", func() ([]byte, error) { return h.Realloc(b, 2<<20) }, heap.ErrExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.call()
			if got != nil || !errors.Is(err, tt.want) {
				t.Fatalf("= %#x, %v, want nil, %v", heaptest.Addr(got), err, tt.want)
			}
			heaptest.MustCheck(t, h, tt.name)
		})
	}
}

// TestLimit fills a small heap until it refuses, and checks that it stays
// usable and within its limit.
func TestLimit(t *testing.T) {
	const limit = 1 << 20
	h := newHeap(t, heap.Limit(limit), heap.Retain(0))
	var bs [][]byte
	for _, size := range []int{64, 3000, 200, 40000} {
		for {
			b, err := h.Alloc(size, 1)
			if err != nil {
				if !errors.Is(err, heap.ErrExhausted) {
					t.Fatalf("Alloc(%d) = %v, want nil or %v", size, err, heap.ErrExhausted)
				}
				break
			}
			heaptest.Fill(b, len(bs))
			bs = append(bs, b)
		}
		heaptest.MustCheck(t, h, "filling")
		if st := checkStats(t, h); st.Footprint > limit || st.Footprint < limit-64<<10 {
			t.Fatalf("Stats().Footprint = %d after a refusal, want within 64 KiB under the limit %d", st.Footprint, limit)
		}
	}
	for i, b := range bs {
		if heaptest.Intact(b, i) >= 0 {
			t.Fatalf("block %d lost its bytes", i)
		}
		if err := h.Free(b); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := h.Alloc(limit/2, 1); err != nil {
		t.Fatalf("Alloc(limit/2) after freeing everything = %v", err)
	} else {
		h.Free(b)
	}
	heaptest.MustCheck(t, h, "freeing")
}

// TestClosed checks that every method of a closed heap, and of the zero
// Heap, reports ErrClosed (or nothing) without touching memory.
func TestClosed(t *testing.T) {
	h, _ := heap.New()
	b, _ := h.Alloc(100, 1)
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	for name, hh := range map[string]*heap.Heap{"closed": h, "zero": new(heap.Heap)} {
		t.Run(name, func(t *testing.T) {
			if got, err := hh.Alloc(8, 1); got != nil || !errors.Is(err, heap.ErrClosed) {
				t.Fatalf("Alloc = %v, %v, want nil, ErrClosed", got, err)
			}
			if got, err := hh.Alloc(5000, 1); got != nil || !errors.Is(err, heap.ErrClosed) {
				t.Fatalf("Alloc(5000) = %v, %v, want nil, ErrClosed", got, err)
			}
			if err := hh.Free(b); !errors.Is(err, heap.ErrClosed) {
				t.Fatalf("Free = %v, want ErrClosed", err)
			}
			if got, err := hh.Realloc(b, 10); got != nil || !errors.Is(err, heap.ErrClosed) {
				t.Fatalf("Realloc = %v, %v, want nil, ErrClosed", got, err)
			}
			if _, err := hh.UsableSize(b); !errors.Is(err, heap.ErrClosed) {
				t.Fatalf("UsableSize = %v, want ErrClosed", err)
			}
			if _, err := hh.Trim(); !errors.Is(err, heap.ErrClosed) {
				t.Fatalf("Trim = %v, want ErrClosed", err)
			}
			if hh.Contains(b) || hh.Footprint() != 0 || len(hh.Map().Segments) != 0 {
				t.Fatal("a closed heap still holds memory")
			}
			if st := hh.Stats(); st.Footprint != 0 || st.Resident != 0 || st.Live != 0 {
				t.Fatalf("Stats() = %+v", st.Stats)
			}
		})
	}
	if err := h.Close(); !errors.Is(err, heap.ErrClosed) {
		t.Fatalf("Close twice = %v, want ErrClosed", err)
	}
	var zero heap.Heap
	if err := zero.Close(); !errors.Is(err, heap.ErrClosed) {
		t.Fatalf("Close of the zero Heap = %v, want ErrClosed", err)
	}
	heaptest.MustCheck(t, h, "Close")
}

// TestClassTable checks the generated table's properties the heap relies
// on: classes grow, each a multiple of 8 whose slots fit a page, every
// size up to MaxSmall has a class that holds it, and above 128 bytes the
// rounding alone stays under 7% (classes.go states the bound with the
// slab's tail); above, the exact classes are the powers of two from 512
// to a page.
func TestClassTable(t *testing.T) {
	all := heap.ClassSizes()
	if len(all) != 33 || !slices.Equal(all[29:], []int{512, 1024, 2048, 4096}) {
		t.Fatalf("classes %v: want 29 up to %d, then 512, 1024, 2048, 4096", all, heap.MaxSmall)
	}
	sizes := all[:29]
	if sizes[0] != 8 || sizes[len(sizes)-1] != heap.MaxSmall {
		t.Fatalf("classes %v: want 29, from 8 to %d", sizes, heap.MaxSmall)
	}
	for i, s := range sizes {
		if s%8 != 0 || i > 0 && s <= sizes[i-1] || heap.PageSize/s < 16 {
			t.Fatalf("class %d of %d bytes: want a multiple of 8, above the one before, 16 slots a page or more", i, s)
		}
		if s <= 128 && i > 0 && s-sizes[i-1] != 8 {
			t.Fatalf("class of %d bytes: up to 128, classes are 8 bytes apart", s)
		}
	}
	h := newHeap(t)
	for n := 0; n <= heap.MaxSmall; n++ {
		b, err := h.Alloc(n, 1)
		if err != nil {
			t.Fatal(err)
		}
		u, _ := h.UsableSize(b)
		i, _ := slices.BinarySearch(sizes, max(n, 1))
		if u != sizes[i] {
			t.Fatalf("Alloc(%d) takes a slot of %d bytes, want the smallest class that holds it, %d", n, u, sizes[i])
		}
		if n > 128 && float64(u-n)/float64(u) > 0.07 {
			t.Fatalf("Alloc(%d) wastes %d of %d bytes to rounding, above 7%%", n, u-n, u)
		}
		h.Free(b)
	}
	slo, shi, _, _ := h.Zones()
	for n := heap.MaxSmall + 1; n <= 2*heap.PageSize; n++ {
		b, err := h.Alloc(n, 1)
		if err != nil {
			t.Fatal(err)
		}
		u, _ := h.UsableSize(b)
		exact := slices.Contains(all[29:], u)
		if small := heaptest.Addr(b) >= slo && heaptest.Addr(b) < shi; small != exact || exact && u-n >= 8 {
			t.Fatalf("Alloc(%d): a block of %d usable bytes, in the small zone %t: want an exact class for 0 to 7 bytes under a power of two from 512 to 4096, a best-fit block otherwise", n, u, small)
		}
		h.Free(b)
	}
}

func TestAllocsPerRun(t *testing.T) {
	h := newHeap(t)
	keep, _ := h.Alloc(64, 1)
	keepBig, _ := h.Alloc(5000, 1)
	defer h.Free(keep)
	defer h.Free(keepBig)
	for _, size := range []int{64, 5000} {
		n := testing.AllocsPerRun(1000, func() {
			b, err := h.Alloc(size, 1)
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Free(b); err != nil {
				t.Fatal(err)
			}
		})
		if n != 0 {
			t.Errorf("Alloc(%d) + Free: %v Go allocations per run, want 0", size, n)
		}
	}
}

// TestMap checks the map of a heap with slabs, blocks, holes and pages
// given back against its statistics.
func TestMap(t *testing.T) {
	h := newHeap(t, heap.Retain(0))
	var bs [][]byte
	for i := range 300 {
		b, _ := h.Alloc([]int{24, 200, 700, 9000, 70000}[i%5], 1)
		bs = append(bs, b)
	}
	for i := 0; i < len(bs); i += 3 {
		h.Free(bs[i])
	}
	m := checkMap(t, h)
	ms := m.Stats()
	if ms.Live == 0 || ms.Free == 0 || ms.Header == 0 || ms.Reserved == 0 || len(m.Regions) != 2 {
		t.Fatalf("Map() = %+v, %d regions: want live, free, header and given-back bytes, two regions", ms, len(m.Regions))
	}
}

// TestUsableSize checks that a Realloc to UsableSize keeps the block
// where it is.
func TestUsableSize(t *testing.T) {
	h := newHeap(t)
	for _, size := range []int{1, 30, 129, 250, 300, 1000, 5000} {
		b, _ := h.Alloc(size, 1)
		u, err := h.UsableSize(b)
		if err != nil || u < size {
			t.Fatalf("UsableSize(Alloc(%d)) = %d, %v", size, u, err)
		}
		n, err := h.Realloc(b, u)
		if err != nil || heaptest.Addr(n) != heaptest.Addr(b) {
			t.Fatalf("Realloc(Alloc(%d), UsableSize %d) moved the block, or failed: %v", size, u, err)
		}
		h.Free(n)
	}
	heaptest.MustCheck(t, h, "UsableSize")
}

// TestKeptSlabs: a slab that empties stays for its class, so a request
// and its free in turn make one slab, not one each time; the kept slabs
// go, oldest first, past their bound; Retain(0) keeps none; Trim gives
// the kept slabs back with the free pages.
func TestKeptSlabs(t *testing.T) {
	h := newHeap(t)
	for i := range 1000 {
		b, err := h.Alloc(64, 8)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Free(b); err != nil {
			t.Fatal(err)
		}
		if st := h.Stats(); st.Slabs != 1 || st.Kept != 1 || st.Slots != 0 {
			t.Fatalf("pair %d: %d slabs, %d kept, %d slots; want the one slab kept", i, st.Slabs, st.Kept, st.Slots)
		}
	}
	heaptest.MustCheck(t, h, "pairs")

	// One slab of each of 40 classes, emptied one after the other: the
	// heap (a few pages) keeps one, the last.
	var bs [][]byte
	for c := range 40 {
		b, err := h.Alloc(8*(c+1), 1)
		if err != nil {
			t.Fatal(err)
		}
		bs = append(bs, b)
	}
	for _, b := range bs {
		if err := h.Free(b); err != nil {
			t.Fatal(err)
		}
	}
	st := h.Stats()
	if st.Kept != 1 || st.Slabs != 1 {
		t.Errorf("after 40 slabs emptied in a small heap: %d slabs, %d kept; want 1 and 1 (the bound)", st.Slabs, st.Kept)
	}
	heaptest.MustCheck(t, h, "emptied")
	n, err := h.Trim()
	if after := h.Stats(); err != nil || after.Slabs != 0 || after.Kept != 0 || after.Footprint != st.Footprint-n {
		t.Errorf("Trim() = %d, %v: then %d slabs, %d kept, footprint %d (from %d)", n, err, after.Slabs, after.Kept, after.Footprint, st.Footprint)
	}

	none := newHeap(t, heap.Retain(0))
	b, _ := none.Alloc(64, 8)
	if err := none.Free(b); err != nil {
		t.Fatal(err)
	}
	if st := none.Stats(); st.Slabs != 0 || st.Kept != 0 {
		t.Errorf("Retain(0): %d slabs, %d kept after the last slot's free; want none", st.Slabs, st.Kept)
	}
}

// TestRetainShare: a large heap keeps up to 1/RetainShare of its
// footprint of free pages resident, more than the floor, and no more
// (after a burst of purges, at least half of that, less the last run).
func TestRetainShare(t *testing.T) {
	h := newHeap(t)
	const n = 8192 // blocks of 16 KiB: 128 MiB
	var bs [][]byte
	for range n {
		b, err := h.Alloc(16<<10, 1)
		if err != nil {
			t.Fatal(err)
		}
		heaptest.Fill(b, 3) // resident
		bs = append(bs, b)
	}
	for i := 0; i < n; i += 2 { // holes: every other block
		if err := h.Free(bs[i]); err != nil {
			t.Fatal(err)
		}
	}
	st := checkStats(t, h)
	budget := max(int64(heap.RetainFloor), st.Footprint/heap.RetainShare)
	if st.Dirty > budget || st.Dirty < budget/2-16<<10 || st.Dirty <= heap.RetainFloor {
		t.Errorf("footprint %d: %d bytes of free pages resident, want above the floor %d and at most %d", st.Footprint, st.Dirty, heap.RetainFloor, budget)
	}
	heaptest.MustCheck(t, h, "holes")
}
