package heapmap_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/carvelab/carve/heapmap"
)

type add struct {
	kind  heapmap.Kind
	class int
	n     int64
}

// build returns a map made by appending adds.
func build(adds ...add) heapmap.Map {
	m := heapmap.Map{Name: "test"}
	for _, a := range adds {
		m.Append(a.kind, a.class, a.n)
	}
	return m
}

func seg(off, n int64, k heapmap.Kind, class int) heapmap.Segment {
	return heapmap.Segment{Off: off, Len: n, Kind: k, Class: class}
}

func TestAppend(t *testing.T) {
	const (
		live, free, header = heapmap.Live, heapmap.Free, heapmap.Header
	)
	for _, tc := range []struct {
		name string
		adds []add
		want []heapmap.Segment
	}{
		{"empty", nil, nil},
		{"nothing of no length", []add{{live, 0, 0}, {free, 0, -1}}, nil},
		{"one", []add{{live, 0, 16}}, []heapmap.Segment{seg(0, 16, live, 0)}},
		{"same kind and class merge", []add{{live, 0, 16}, {live, 0, 8}},
			[]heapmap.Segment{seg(0, 24, live, 0)}},
		{"classes stay apart", []add{{live, 4, 16}, {live, 5, 32}},
			[]heapmap.Segment{seg(0, 16, live, 4), seg(16, 32, live, 5)}},
		{"each free segment is a hole", []add{{free, 0, 16}, {free, 0, 16}},
			[]heapmap.Segment{seg(0, 16, free, 0), seg(16, 16, free, 0)}},
		{"blocks with headers", []add{{header, 0, 8}, {live, 0, 24}, {free, 0, 32}, {header, 0, 8}, {live, 0, 56}},
			[]heapmap.Segment{seg(0, 8, header, 0), seg(8, 24, live, 0), seg(32, 32, free, 0), seg(64, 8, header, 0), seg(72, 56, live, 0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := build(tc.adds...)
			if !slices.Equal(m.Segments, tc.want) {
				t.Errorf("segments = %v, want %v", m.Segments, tc.want)
			}
			var size int64
			for _, s := range tc.want {
				size += s.Len
			}
			if m.Size != size {
				t.Errorf("Size = %d, want %d", m.Size, size)
			}
			if err := m.Check(); err != nil {
				t.Errorf("Check() = %v", err)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	good := []heapmap.Segment{seg(0, 8, heapmap.Header, 0), seg(8, 8, heapmap.Live, 0)}
	for _, tc := range []struct {
		name string
		m    heapmap.Map
		ok   bool
	}{
		{"empty", heapmap.Map{}, true},
		{"good", heapmap.Map{Size: 16, Segments: good}, true},
		{"good with regions", heapmap.Map{Size: 16, Segments: good,
			Regions: []heapmap.Region{{Off: 0, Len: 8, Label: "a"}, {Off: 8, Len: 8, Label: "b"}}}, true},
		{"size too large", heapmap.Map{Size: 17, Segments: good}, false},
		{"size too small", heapmap.Map{Size: 15, Segments: good}, false},
		{"gap", heapmap.Map{Size: 24, Segments: []heapmap.Segment{seg(0, 8, heapmap.Live, 0), seg(16, 8, heapmap.Live, 0)}}, false},
		{"overlap", heapmap.Map{Size: 12, Segments: []heapmap.Segment{seg(0, 8, heapmap.Live, 0), seg(4, 8, heapmap.Free, 0)}}, false},
		{"not from 0", heapmap.Map{Size: 16, Segments: []heapmap.Segment{seg(8, 8, heapmap.Live, 0)}}, false},
		{"empty segment", heapmap.Map{Size: 8, Segments: []heapmap.Segment{seg(0, 0, heapmap.Live, 0), seg(0, 8, heapmap.Live, 0)}}, false},
		{"unknown kind", heapmap.Map{Size: 8, Segments: []heapmap.Segment{seg(0, 8, heapmap.Kind(9), 0)}}, false},
		{"region past the end", heapmap.Map{Size: 16, Segments: good, Regions: []heapmap.Region{{Off: 8, Len: 9}}}, false},
		{"regions overlap", heapmap.Map{Size: 16, Segments: good,
			Regions: []heapmap.Region{{Off: 0, Len: 9}, {Off: 8, Len: 8}}}, false},
		{"empty region", heapmap.Map{Size: 16, Segments: good, Regions: []heapmap.Region{{Off: 4, Len: 0}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.m.Check()
			if (err == nil) != tc.ok || err != nil && !errors.Is(err, heapmap.ErrShape) {
				t.Errorf("Check() = %v, want ok %t (or ErrShape)", err, tc.ok)
			}
		})
	}
}

func TestStats(t *testing.T) {
	m := build(
		add{heapmap.Padding, 0, 8},
		add{heapmap.Header, 0, 8}, add{heapmap.Live, 0, 24},
		add{heapmap.Free, 0, 1040},
		add{heapmap.Header, 0, 8}, add{heapmap.Live, 0, 72},
		add{heapmap.Free, 0, 96}, add{heapmap.Free, 0, 2048},
		add{heapmap.Unused, 0, 100},
		add{heapmap.Reserved, 0, 4096},
	)
	want := heapmap.Stats{Live: 96, Free: 3184, Header: 16, Padding: 8, Unused: 100, Reserved: 4096, Holes: 3, Largest: 2048}
	st := m.Stats()
	if st != want {
		t.Errorf("Stats() = %+v, want %+v", st, want)
	}
	var sum int64
	for _, k := range heapmap.Kinds() {
		sum += st.Bytes(k)
	}
	if sum != m.Size {
		t.Errorf("bytes of every kind add up to %d, Size is %d", sum, m.Size)
	}
}

func TestKindString(t *testing.T) {
	var names []string
	for _, k := range heapmap.Kinds() {
		names = append(names, k.String())
	}
	want := []string{"live", "rounding", "free", "header", "padding", "unused", "reserved"}
	if !slices.Equal(names, want) {
		t.Errorf("kinds = %q, want %q", names, want)
	}
	if s := heapmap.Kind(42).String(); s != "Kind(42)" {
		t.Errorf("Kind(42).String() = %q", s)
	}
}

// TestSplitAsked splits the Live segments of a map by the sizes asked
// for: fit-like blocks behind headers, and chunks of one class side by
// side in one Live segment.
func TestSplitAsked(t *testing.T) {
	var m heapmap.Map
	m.Base = 0x1000
	m.Append(heapmap.Header, 0, 8)
	m.Append(heapmap.Live, 0, 40) // a block at 8, asked 30
	m.Append(heapmap.Free, 0, 64)
	m.Append(heapmap.Live, 16, 48) // three chunks of 16 at 112: asked 16, 10 and 1
	m.Append(heapmap.Unused, 0, 16)
	got := m.SplitAsked([]heapmap.Block{{Off: 144, Asked: 1, Usable: 16}, {Off: 8, Asked: 30, Usable: 40}, {Off: 112, Asked: 16, Usable: 16}, {Off: 128, Asked: 10, Usable: 16}})
	if err := got.Check(); err != nil {
		t.Fatal(err)
	}
	st := got.Stats()
	if st.Live != 30+16+10+1 || st.Rounding != 10+6+15 || got.Size != m.Size || st.Free != 64 || st.Header != 8 {
		t.Errorf("split: %+v, size %d; want live 57, rounding 31, the rest as before", st, got.Size)
	}
	if m.Stats().Rounding != 0 {
		t.Errorf("SplitAsked changed its receiver")
	}
	for _, tc := range []struct {
		addr uintptr
		off  int64
		ok   bool
	}{{0x1000, 0, true}, {0x1000 + 175, 175, true}, {0x1000 + 176, 0, false}, {0xfff, 0, false}} {
		if off, ok := m.Offset(tc.addr); off != tc.off || ok != tc.ok {
			t.Errorf("Offset(%#x) = %d, %t; want %d, %t", tc.addr, off, ok, tc.off, tc.ok)
		}
	}
	spans := heapmap.Map{Size: 96, Spans: []heapmap.Span{{Off: 0, Len: 64, Addr: 0x9000}, {Off: 64, Len: 32, Addr: 0x2000}}}
	spans.Spans = []heapmap.Span{{Off: 64, Len: 32, Addr: 0x2000}, {Off: 0, Len: 64, Addr: 0x9000}} // in address order
	if off, ok := spans.Offset(0x2004); off != 68 || !ok {
		t.Errorf("Offset in the second span = %d, %t", off, ok)
	}
	if off, ok := spans.Offset(0x9000 + 63); off != 63 || !ok {
		t.Errorf("Offset in the first span = %d, %t", off, ok)
	}
	if _, ok := spans.Offset(0x3000); ok {
		t.Error("Offset between spans found one")
	}
}
