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
