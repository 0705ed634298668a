package tags

import (
	"strings"
	"testing"
	"unsafe"
)

// region returns the base of a region of n bytes in Go memory, aligned to
// 16, holding blocks of the given sizes from FirstBlock (a negative size
// is a free block of -size bytes), then the top.
func region(t *testing.T, n int, sizes ...int) (unsafe.Pointer, Offset) {
	t.Helper()
	buf := make([]uint64, n/8+2)
	base := unsafe.Pointer(&buf[0])
	if uintptr(base)%Granule != 0 {
		base = unsafe.Add(base, 8)
	}
	p, prevInUse := FirstBlock, true
	for _, s := range sizes {
		inUse := s > 0
		sz := uintptr(max(s, -s))
		if inUse {
			*Hdr(base, p) = NewHeader(sz, true, prevInUse)
		} else {
			SetFree(base, p, sz)
			SetPrev(base, p, prevInUse)
		}
		p += Offset(sz)
		prevInUse = inUse
	}
	return base, p
}

func TestWalk(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sizes []int
		spoil func(base unsafe.Pointer)
		want  string // in the error; "" for none
	}{
		{"tiled", []int{32, -48, 64, -32, 16 * 9}, nil, ""},
		{"bad footer", []int{32, -48, 64}, func(b unsafe.Pointer) { *Footer(b, 48, 48) = 32 }, "footer 32"},
		{"bad P flag", []int{32, -48, 64}, func(b unsafe.Pointer) { SetPrev(b, 96, true) }, "P flag true"},
		{"two free blocks", []int{32, -48, -32, 64}, nil, "not coalesced"},
		{"free before the top", []int{32, -48}, nil, "not merged into the top"},
		{"short block", []int{32, 64}, func(b unsafe.Pointer) { *Hdr(b, 48) = NewHeader(16, true, true) }, "size 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, top := region(t, 1024, tc.sizes...)
			if tc.spoil != nil {
				tc.spoil(base)
			}
			var seen []Offset
			tl, err := Walk(base, top, func(p Offset, _ Header) error { seen = append(seen, p); return nil })
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Walk = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Walk = %v, want an error saying %q", err, tc.want)
			case tc.want == "" && (len(seen) != len(tc.sizes) || tl.Used != 32+64+144 || tl.Blocks != 3 || tl.FreeBytes != 80 || len(tl.Frees) != 2):
				t.Fatalf("Walk = %+v, visiting %v; want 3 blocks of 240 bytes in use, 2 free of 80", tl, seen)
			}
		})
	}
}

func TestLists(t *testing.T) {
	base, top := region(t, 1024, 32, -48, 32, -64, 32, -48, 32)
	tl, err := Walk(base, top, nil)
	if err != nil {
		t.Fatalf("Walk = %v, want nil", err)
	}
	var head Link
	for _, p := range tl.Frees {
		Push(base, &head, p)
	}
	check := func(frees []Offset) error {
		seen := NewSeen(frees)
		if err := CheckList(base, head, seen.Visit, "list", func(uintptr) bool { return true }); err != nil {
			return err
		}
		if p, ok := seen.Missing(); ok {
			t.Fatalf("CheckList: block at %d missing", p)
		}
		return nil
	}
	if err := check(tl.Frees); err != nil {
		t.Fatalf("CheckList after pushing %v = %v, want nil", tl.Frees, err)
	}
	Unlink(base, &head, tl.Frees[1])
	rest := []Offset{tl.Frees[0], tl.Frees[2]}
	if err := check(rest); err != nil {
		t.Fatalf("CheckList after unlinking %d = %v, want nil", tl.Frees[1], err)
	}
	Links(base, tl.Frees[0])[1] = tl.Frees[0].Link()
	if err := check(rest); err == nil || !strings.Contains(err.Error(), "links back") {
		t.Fatalf("CheckList with a broken back link = %v, want an error", err)
	}
	if err := NewSeen(rest).Visit(tl.Frees[1].Link(), "x"); err == nil {
		t.Fatalf("Visit of a block that is not free = nil, want an error")
	}
}

func TestBlockSize(t *testing.T) {
	for _, tc := range []struct{ n, want int }{{0, 32}, {24, 32}, {25, 48}, {40, 48}, {1000, 1008}} {
		if got := BlockSize(tc.n); got != uintptr(tc.want) {
			t.Errorf("BlockSize(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

func TestBins(t *testing.T) {
	// Free blocks of 48, 64, 48 and 1008 bytes between blocks in use.
	base, top := region(t, 4096, 32, -48, 32, -64, 32, -48, 32, -1008, 32)
	tl, err := Walk(base, top, nil)
	if err != nil {
		t.Fatalf("Walk = %v, want nil", err)
	}
	var b Bins
	check := func(step string, frees ...Offset) {
		t.Helper()
		seen := NewSeen(frees)
		if err := b.Check(base, seen.Visit); err != nil {
			t.Fatalf("Check after %s = %v, want nil", step, err)
		}
		if p, ok := seen.Missing(); ok {
			t.Fatalf("Check after %s: block at %d missing from the bins", step, p)
		}
	}
	if p := b.Fit(16); p != 0 || b.Largest() != 0 {
		t.Fatalf("empty Bins: Fit(16) = %d, Largest() = %d, want 0, 0", p, b.Largest())
	}
	for _, p := range tl.Frees {
		b.Insert(base, p, Hdr(base, p).Size())
	}
	check("inserting", tl.Frees...)
	f48a, f64, f48b, f1008 := tl.Frees[0], tl.Frees[1], tl.Frees[2], tl.Frees[3]
	for _, tc := range []struct {
		s    uintptr
		want Offset
	}{{16, f48b}, {48, f48b}, {64, f64}, {80, f1008}, {1008, f1008}, {1024, 0}} {
		if got := b.Fit(tc.s); got != tc.want {
			t.Errorf("Fit(%d) = %d, want %d", tc.s, got, tc.want)
		}
	}
	if got := b.Largest(); got != 1008 {
		t.Errorf("Largest() = %d, want 1008", got)
	}
	b.Remove(base, f48b, 48) // the head of its bin
	check("removing a head", f48a, f64, f1008)
	b.Remove(base, f48a, 48) // the bin's last block
	b.Remove(base, f1008, 1008)
	check("emptying two bins", f64)
	if got, l := b.Fit(16), b.Largest(); got != f64 || l != 64 || b.Map != 1<<4 {
		t.Fatalf("Fit(16) = %d, Largest() = %d, Map %#x; want %d, 64, only bit 4", got, l, b.Map, f64)
	}
}
