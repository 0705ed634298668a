package fit_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/carvelab/carve/fit"
	"github.com/carvelab/carve/heapmap"
	"github.com/carvelab/carve/internal/heaptest"
)

// checkMap checks the heap's map against its shape and the heap's
// statistics, as Heap.Map documents them, and returns it:
//
//	Live + Header = Used, Header = HeaderBytes, Free = FreeBytes,
//	Holes = FreeBlocks, Largest = Largest, Unused = Top,
//	Padding = 8 and Size = Footprint (or all zero if nothing is committed),
//	Stats.Live <= Live; every block handed out lies in a Live segment.
//
// It also checks that taking the map changed nothing.
func checkMap(t *testing.T, h *fit.Heap, blocks ...[]byte) heapmap.Map {
	t.Helper()
	m, before := heaptest.TakeMap(t, h, func() fit.Stats {
		st := h.Stats()
		st.Resident = 0
		return st
	})
	st := m.Stats()
	var padding int64
	if before.Footprint > 0 {
		padding = 8
	}
	want := heapmap.Stats{
		Live: before.Used - before.HeaderBytes, Header: before.HeaderBytes,
		Free: before.FreeBytes, Holes: int(before.FreeBlocks), Largest: before.Largest,
		Unused: before.Top, Padding: padding,
	}
	if st != want || m.Size != before.Footprint || m.Name != before.Policy.String() {
		t.Fatalf("Map() of %q, %d bytes, adds up to %+v; heap %s, Footprint %d: want %+v", m.Name, m.Size, st, before.Policy, before.Footprint, want)
	}
	if before.Live > st.Live {
		t.Fatalf("Map() has %d bytes live, Stats().Live is %d", st.Live, before.Live)
	}
	heaptest.InLive(t, m, blocks)
	return m
}

// TestMapConnection: after the block-allocator article's connection
// scenario, every policy's map shows n holes of 1040 bytes, each between
// two live sessions.
func TestMapConnection(t *testing.T) {
	for _, p := range fit.Policies() {
		for _, n := range []int{1, 100, 5000} {
			t.Run(fmt.Sprint(p, "/", n), func(t *testing.T) {
				h, err := fit.New(p)
				if err != nil {
					t.Fatal(err)
				}
				defer h.Close()
				sessions := heaptest.Connect(t, h, n)
				m := checkMap(t, h, sessions...)
				if st := m.Stats(); st.Holes != n || st.Largest != 1040 || st.Free != int64(n)*1040 {
					t.Errorf("Map() after %d connections: %d holes, largest %d, %d bytes free; want %d holes of 1040 bytes", n, st.Holes, st.Largest, st.Free, n)
				}
				// padding, then (hole, session) n times, then the top.
				for i, s := range m.Segments[1 : 1+3*n] {
					want := []heapmap.Kind{heapmap.Free, heapmap.Header, heapmap.Live}[i%3]
					if s.Kind != want {
						t.Fatalf("segment %d: %+v, want %v", 1+i, s, want)
					}
				}
			})
		}
	}
}

// TestMapStates draws heaps in the states the fit tests name: empty,
// closed, trimmed, with aligned blocks and a grown top.
func TestMapStates(t *testing.T) {
	type op func(t *testing.T, h *fit.Heap, live map[string][]byte)
	alloc := func(name string, size, align int) op {
		return func(t *testing.T, h *fit.Heap, live map[string][]byte) {
			b, err := h.Alloc(size, align)
			if err != nil {
				t.Fatalf("Alloc(%d, %d) = %v", size, align, err)
			}
			live[name] = b
		}
	}
	free := func(name string) op {
		return func(t *testing.T, h *fit.Heap, live map[string][]byte) {
			if err := h.Free(live[name]); err != nil {
				t.Fatalf("Free(%s) = %v", name, err)
			}
			delete(live, name)
		}
	}
	trim := func(t *testing.T, h *fit.Heap, _ map[string][]byte) {
		if _, err := h.Trim(); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		ops   []op
		kinds string // the kinds of the segments, in order: L live, F free, H header, P padding, U unused
	}{
		{"new", nil, ""},
		{"one block", []op{alloc("a", 16, 1)}, "PHLU"},
		{"two blocks", []op{alloc("a", 16, 1), alloc("b", 100, 1)}, "PHLHLU"},
		{"a hole", []op{alloc("a", 16, 1), alloc("b", 100, 1), alloc("c", 16, 1), free("b")}, "PHLFHLU"},
		{"the top merges back", []op{alloc("a", 16, 1), alloc("b", 100, 1), free("b")}, "PHLU"},
		{"all freed", []op{alloc("a", 16, 1), free("a")}, "PU"},
		{"all freed and trimmed", []op{alloc("a", 16, 1), free("a"), trim}, ""},
		{"aligned: the gap is a free block", []op{alloc("a", 16, 1), alloc("b", 64, 1024)}, "PHLFHLU"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := fit.New(fit.FirstFit)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			live := map[string][]byte{}
			for _, o := range tc.ops {
				o(t, h, live)
			}
			var blocks [][]byte
			for _, b := range live {
				blocks = append(blocks, b)
			}
			m := checkMap(t, h, blocks...)
			var kinds strings.Builder
			for _, s := range m.Segments {
				kinds.WriteByte(strings.ToUpper(s.Kind.String())[0])
			}
			if kinds.String() != tc.kinds {
				t.Errorf("Map() segments %s, want %s (%+v)", kinds.String(), tc.kinds, m.Segments)
			}
		})
	}
	t.Run("closed", func(t *testing.T) {
		h, err := fit.New(fit.BestFit)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Alloc(100, 1); err != nil {
			t.Fatal(err)
		}
		h.Close()
		if m := h.Map(); m.Size != 0 || len(m.Segments) != 0 || m.Name != "best-fit" {
			t.Errorf("Map() of a closed heap = %+v, want an empty map named best-fit", m)
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

// runMapOps is FuzzMap's body.
func runMapOps(t *testing.T, cfg byte, ops []byte) {
	p := fit.Policies()[int(cfg)%len(fit.Policies())]
	opts := []fit.Option{fit.Limit(8 << 20)}
	if cfg&4 != 0 {
		opts = append(opts, fit.TrimThreshold(0), fit.TopPad(0))
	}
	h, err := fit.New(p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	heaptest.RunOps(t, h, ops, func(live [][]byte) { checkMap(t, h, live...) })
}

// TestMapRandom runs FuzzMap's body over pseudo-random inputs from a fixed
// seed.
func TestMapRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 8 {
		ops := make([]byte, 300)
		for j := range ops {
			ops[j] = byte(r.Uint32())
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) { runMapOps(t, byte(i), ops) })
	}
}
