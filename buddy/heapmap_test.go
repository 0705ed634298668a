package buddy_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/carvelab/carve/buddy"
	"github.com/carvelab/carve/heapmap"
	"github.com/carvelab/carve/internal/heaptest"
)

// checkMap checks the heap's map against its shape and the heap's
// statistics, as Heap.Map documents them, and returns it:
//
//	Live + Header + Padding = Used, Header + Padding = HeaderBytes,
//	Size - Reserved = Footprint, Stats.Live <= Live,
//	every Free segment no longer than its block (2^Class), Largest no
//	larger than the largest free block; every block handed out lies in a
//	Live segment.
//
// It also checks that taking the map changed nothing.
func checkMap(t *testing.T, h *buddy.Heap, blocks ...[]byte) heapmap.Map {
	t.Helper()
	m, before := heaptest.TakeMap(t, h, func() buddy.Stats {
		st := h.Stats()
		st.Resident = 0
		return st
	})
	st := m.Stats()
	switch {
	case m.Name != before.Mode.String():
		t.Fatalf("Map() is named %q, want %q", m.Name, before.Mode)
	case st.Live+st.Header+st.Padding != before.Used || st.Header+st.Padding != before.HeaderBytes:
		t.Fatalf("Map() has %d bytes live, %d of headers, %d of padding; Stats() Used %d, HeaderBytes %d", st.Live, st.Header, st.Padding, before.Used, before.HeaderBytes)
	case m.Size-st.Reserved != before.Footprint:
		t.Fatalf("Map() covers %d bytes, %d reserved; Footprint is %d", m.Size, st.Reserved, before.Footprint)
	case before.Live > st.Live:
		t.Fatalf("Map() has %d bytes live, Stats().Live is %d", st.Live, before.Live)
	case before.Mode == buddy.Plain && (st.Header != 0 || st.Padding != 0):
		t.Fatalf("Map() of a plain heap has %d bytes of headers and %d of padding", st.Header, st.Padding)
	}
	largest := int64(0)
	for k, n := range before.FreeByOrder {
		if n > 0 {
			largest = 1 << k
		}
	}
	if st.Largest > largest {
		t.Fatalf("Map()'s largest hole %d, the largest free block %d", st.Largest, largest)
	}
	for _, s := range m.Segments {
		if s.Kind == heapmap.Free && s.Len > 1<<s.Class {
			t.Fatalf("free segment %+v is longer than a block of order %d", s, s.Class)
		}
	}
	heaptest.InLive(t, m, blocks)
	return m
}

// TestMapPairs allocates 2n blocks back to back and frees every other
// one: each freed block's buddy is in use, so the map shows n holes of a
// block each, all in committed granules.
func TestMapPairs(t *testing.T) {
	for _, tc := range []struct {
		mode  buddy.Mode
		n     int
		size  int
		order int // of the blocks
	}{
		{buddy.Plain, 32, 1024, 10},
		{buddy.Plain, 1024, 1024, 10},
		{buddy.Plain, 4096, 16, 4},
		{buddy.Header, 32, 1024, 11}, // 1024 + the header: a block of 2 KiB
		{buddy.Header, 1024, 1000, 10},
		{buddy.Header, 4096, 16, 5},
	} {
		t.Run(fmt.Sprint(tc.mode, "/", tc.n, "x", tc.size), func(t *testing.T) {
			h, err := buddy.New(tc.mode)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			var kept, freed [][]byte
			for i := range 2 * tc.n {
				b, err := h.Alloc(tc.size, 1)
				if err != nil {
					t.Fatal(err)
				}
				if i%2 == 0 {
					freed = append(freed, b)
				} else {
					kept = append(kept, b)
				}
			}
			for _, b := range freed {
				if err := h.Free(b); err != nil {
					t.Fatal(err)
				}
			}
			m := checkMap(t, h, kept...)
			if st := m.Stats(); st.Holes != tc.n || st.Largest != 1<<tc.order || st.Free != int64(tc.n)<<tc.order || st.Reserved != 0 {
				t.Errorf("Map(): %d holes, largest %d, %d bytes free, %d reserved; want %d holes of %d bytes, none reserved",
					st.Holes, st.Largest, st.Free, st.Reserved, tc.n, 1<<tc.order)
			}
			for _, s := range m.Segments {
				if s.Class != tc.order {
					t.Fatalf("segment %+v: want blocks of order %d only", s, tc.order)
				}
			}
		})
	}
}

// TestMapHeader draws a block in use in Header mode: padding up to the
// alignment asked for, the header, the payload.
func TestMapHeader(t *testing.T) {
	for _, tc := range []struct {
		size, align int
		want        []heapmap.Segment // the first block's segments
	}{
		{100, 1, []heapmap.Segment{{Off: 0, Len: 16, Kind: heapmap.Header, Class: 7}, {Off: 16, Len: 112, Kind: heapmap.Live, Class: 7}}},
		{100, 256, []heapmap.Segment{{Off: 0, Len: 240, Kind: heapmap.Padding, Class: 9}, {Off: 240, Len: 16, Kind: heapmap.Header, Class: 9},
			{Off: 256, Len: 256, Kind: heapmap.Live, Class: 9}}},
		{0, 1, []heapmap.Segment{{Off: 0, Len: 16, Kind: heapmap.Header, Class: 5}, {Off: 16, Len: 16, Kind: heapmap.Live, Class: 5}}},
	} {
		t.Run(fmt.Sprint(tc.size, "/", tc.align), func(t *testing.T) {
			h, err := buddy.New(buddy.Header)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			b, err := h.Alloc(tc.size, tc.align)
			if err != nil {
				t.Fatal(err)
			}
			m := checkMap(t, h, b)
			for i, want := range tc.want {
				if m.Segments[i] != want {
					t.Errorf("segment %d = %+v, want %+v", i, m.Segments[i], want)
				}
			}
		})
	}
}

// TestMapStates draws heaps empty, closed, with granules given back in the
// middle, and whose span ends inside a granule.
func TestMapStates(t *testing.T) {
	t.Run("new", func(t *testing.T) {
		h, err := buddy.New(buddy.Plain)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		if m := checkMap(t, h); m.Size != 0 || len(m.Segments) != 0 {
			t.Errorf("Map() of a new heap = %+v, want empty", m)
		}
	})
	t.Run("closed", func(t *testing.T) {
		h, err := buddy.New(buddy.Header)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Alloc(100, 1); err != nil {
			t.Fatal(err)
		}
		h.Close()
		if m := h.Map(); m.Size != 0 || len(m.Segments) != 0 || m.Name != "buddy-header" {
			t.Errorf("Map() of a closed heap = %+v, want an empty map named buddy-header", m)
		}
	})
	t.Run("granules given back", func(t *testing.T) {
		// Three granules of blocks; the middle one's freed goes back to
		// the OS at once (Retain 0): the map reserves it.
		const granule = 64 << 10
		h, err := buddy.New(buddy.Plain, buddy.Granule(granule), buddy.Retain(0))
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		var blocks [][]byte
		for range 3 * granule / 4096 {
			b, err := h.Alloc(4096, 1)
			if err != nil {
				t.Fatal(err)
			}
			blocks = append(blocks, b)
		}
		for _, b := range blocks[granule/4096 : 2*granule/4096] {
			if err := h.Free(b); err != nil {
				t.Fatal(err)
			}
		}
		m := checkMap(t, h)
		want := []heapmap.Segment{
			{Off: 0, Len: granule, Kind: heapmap.Live, Class: 12},
			{Off: granule, Len: granule, Kind: heapmap.Reserved, Class: 16},
			{Off: 2 * granule, Len: granule, Kind: heapmap.Live, Class: 12},
		}
		if len(m.Segments) != len(want) {
			t.Fatalf("Map() = %+v, want %+v", m.Segments, want)
		}
		for i := range want {
			if m.Segments[i] != want[i] {
				t.Errorf("segment %d = %+v, want %+v", i, m.Segments[i], want[i])
			}
		}
	})
	t.Run("span inside a granule", func(t *testing.T) {
		// A span of 48 bytes in a page, two roots of 32 and 16 bytes: a
		// request of 16 takes the root of 16, the rest of the page is
		// unused.
		h, err := buddy.New(buddy.Plain, buddy.Limit(48))
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		b, err := h.Alloc(16, 1)
		if err != nil {
			t.Fatal(err)
		}
		m := checkMap(t, h, b)
		st := m.Stats()
		if m.Size != h.Stats().Footprint || st.Live != 16 || st.Free != 32 || st.Unused != m.Size-48 || st.Holes != 1 {
			t.Errorf("Map() = %+v: want 16 bytes live, a hole of 32, the rest of the page unused", m)
		}
	})
}

// FuzzMap runs random Alloc, Free, Realloc and Trim calls, decoded from
// the input, and checks the map after each against the heap's statistics
// (see checkMap).
func FuzzMap(f *testing.F) {
	f.Add(byte(0), []byte("\x10\x20\x30\x81\x40\x82\xc0\xff"))
	f.Add(byte(1), []byte("aaaaaaaa\x80\x80\x80\x80bbbb\xf0"))
	f.Add(byte(2), []byte("\x01\x02\x03\x04\x05\x06\x07\x08\x85\x86\x87\x88\xe0\x10\xff"))
	f.Add(byte(3), []byte("zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\x83\x84\x85\x86\x87\x88\x89\x8a\xe9"))
	f.Fuzz(runMapOps)
}

// runMapOps is FuzzMap's body. cfg picks the mode (bit 0), page-sized
// granules (bit 1), Retain(0) (bit 2) and a span that is not a power of
// two (bit 3).
func runMapOps(t *testing.T, cfg byte, ops []byte) {
	opts := []buddy.Option{buddy.Limit(4 << 20)}
	if cfg&2 != 0 {
		opts = append(opts, buddy.Granule(4096))
	}
	if cfg&4 != 0 {
		opts = append(opts, buddy.Retain(0))
	}
	if cfg&8 != 0 {
		opts[0] = buddy.Limit(3<<20 + 5<<10 + 48)
	}
	h, err := buddy.New(buddy.Mode(cfg&1), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	heaptest.RunOps(t, h, ops, func(live [][]byte) { checkMap(t, h, live...) })
}

// TestMapRandom runs FuzzMap's body over pseudo-random inputs from a fixed
// seed, one per configuration.
func TestMapRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for cfg := range 16 {
		ops := make([]byte, 300)
		for j := range ops {
			ops[j] = byte(r.Uint32())
		}
		t.Run(fmt.Sprint(cfg), func(t *testing.T) { runMapOps(t, byte(cfg), ops) })
	}
}
