package arena

import (
	"errors"
	"testing"

	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/mem"
)

// live is the reference model's record of one allocation: the slice the
// arena returned and the byte its pattern starts from.
type live struct {
	b    []byte
	seed byte
}

func (l live) fill() {
	for i := range l.b {
		l.b[i] = l.seed + byte(i)
	}
}

func (l live) intact() bool {
	for i, c := range l.b {
		if c != l.seed+byte(i) {
			return false
		}
	}
	return true
}

// FuzzArena drives an arena with small blocks and a small limit through a
// random sequence of Alloc, Reset, Release and bad requests, against a
// trivially correct model: the list of live allocations. After every step
// the allocations must be aligned, inside the arena's blocks, apart from
// each other and intact, and the statistics must agree with the model.
//
// Each operation takes three bytes: an opcode, whose high bits choose the
// alignment, and a 16-bit size.
func FuzzArena(f *testing.F) {
	f.Add([]byte{0, 10, 0, 0, 20, 0, 5, 0, 0, 0, 30, 0})
	f.Add([]byte{0x18, 0xff, 0x3f, 0x20, 0x01, 0x00, 0x00, 0x00, 0x00, 0x05, 0, 0, 0x60, 0xff, 0x10})
	f.Add([]byte{0x00, 0xff, 0x7f, 0x00, 0xff, 0x7f, 0x00, 0xff, 0x7f, 0x00, 0xff, 0x7f, 0x00, 0xff, 0x7f, 0x06, 0, 0, 0x01, 8, 0})
	f.Add([]byte{0x68, 0, 0, 0x07, 3, 0, 0x33, 0x40, 0x1f, 0x05, 0, 0, 0x33, 0x40, 0x1f})

	ps := mem.PageSize()
	bs := 2 * ps
	limit := int64(16 * ps)
	f.Fuzz(func(t *testing.T, data []byte) {
		a := newArena(t, BlockSize(bs), Limit(limit))
		var model []live
		var seed byte
		for len(data) >= 3 {
			op, size := data[0], int(data[1])|int(data[2])<<8
			data = data[3:]
			align := 1 << (op >> 3 % 14) // 1 to 8192
			size %= 3 * bs

			switch op & 7 {
			case 0, 1, 2, 3, 4:
				before := statsNoResident(a)
				b, err := a.Alloc(size, align)
				if err != nil {
					if !errors.Is(err, ErrExhausted) {
						t.Fatalf("Alloc(%d, %d) = %v, want nil or %v", size, align, err, ErrExhausted)
					}
					if after := statsNoResident(a); after != before {
						t.Fatalf("failed Alloc(%d, %d) changed the stats from %+v to %+v", size, align, before, after)
					}
					// A page-aligned block of this many bytes holds the
					// request however it is aligned.
					worst := roundUp(int64(max(size, 1)+max(align, ps)-ps), int64(ps))
					if room := (limit - before.Footprint) / int64(ps) * int64(ps); worst <= room {
						t.Fatalf("Alloc(%d, %d) = %v with %d bytes under the limit, want success", size, align, err, room)
					}
					break
				}
				if b == nil || len(b) != size || cap(b) != size || heaptest.Addr(b)%uintptr(align) != 0 || a.owner(b) < 0 {
					t.Fatalf("Alloc(%d, %d) = %#x (nil %v, len %d, cap %d, block %d), want aligned, len == cap == size, in a block",
						size, align, heaptest.Addr(b), b == nil, len(b), cap(b), a.owner(b))
				}
				for _, l := range model {
					if len(b) > 0 && len(l.b) > 0 && heaptest.Addr(b) < heaptest.Addr(l.b)+uintptr(len(l.b)) && heaptest.Addr(l.b) < heaptest.Addr(b)+uintptr(len(b)) {
						t.Fatalf("Alloc(%d, %d) = [%#x, +%d), overlaps live [%#x, +%d)", size, align, heaptest.Addr(b), len(b), heaptest.Addr(l.b), len(l.b))
					}
				}
				seed++
				l := live{b, seed}
				l.fill()
				model = append(model, l)
			case 5:
				verify(t, a, model)
				a.Reset()
				model = model[:0]
			case 6:
				if size%4 != 0 { // Release less often than Reset
					break
				}
				verify(t, a, model)
				if err := a.Release(); err != nil {
					t.Fatalf("Release() = %v, want nil", err)
				}
				model = model[:0]
			case 7:
				before := statsNoResident(a)
				if b, err := a.Alloc(-size-1, align); !errors.Is(err, ErrSize) || b != nil {
					t.Fatalf("Alloc(%d, %d) = %v, want %v", -size-1, align, err, ErrSize)
				}
				if b, err := a.Alloc(size, align*3); !errors.Is(err, ErrAlign) || b != nil {
					t.Fatalf("Alloc(%d, %d) = %v, want %v", size, align*3, err, ErrAlign)
				}
				if after := statsNoResident(a); after != before {
					t.Fatalf("bad requests changed the stats from %+v to %+v", before, after)
				}
			}
			mustCheck(t, a, "a step")
			s := a.Stats()
			var bytes int64
			for _, l := range model {
				bytes += int64(len(l.b))
			}
			if s.Live != bytes || s.Footprint > limit ||
				s.Used != s.Live+s.AlignWaste || s.Footprint != s.Used+s.TailWaste+s.Free || s.Free < 0 {
				t.Fatalf("Stats() = %+v; model has %d allocations of %d bytes, limit %d", s, len(model), bytes, limit)
			}
		}
		verify(t, a, model)
	})
}

// verify fails the test if a live allocation lost its pattern or left the
// arena's blocks.
func verify(t *testing.T, a *Arena, model []live) {
	t.Helper()
	for i, l := range model {
		if !l.intact() || a.owner(l.b) < 0 {
			t.Fatalf("allocation %d of %d, [%#x, +%d): pattern intact %v, block %d", i, len(model), heaptest.Addr(l.b), len(l.b), l.intact(), a.owner(l.b))
		}
	}
}
