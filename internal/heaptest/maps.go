package heaptest

import (
	"reflect"
	"testing"

	"github.com/carvelab/carve/heapmap"
)

// Mapper is a heap that draws its map.
type Mapper interface {
	Checker
	Map() heapmap.Map
}

// TakeMap returns h's map and the statistics stats reads of h, failing
// the test unless taking the map left those statistics as they were and
// the invariants of h and of the map hold. stats leaves out what the OS
// may change at any time (the resident bytes).
func TakeMap[S any](t testing.TB, h Mapper, stats func() S) (heapmap.Map, S) {
	t.Helper()
	before := stats()
	m := h.Map()
	if after := stats(); !reflect.DeepEqual(after, before) {
		t.Fatalf("Stats() changed with Map(): %+v, then %+v", before, after)
	}
	if err := h.Check(); err != nil {
		t.Fatalf("Check() after Map() = %v", err)
	}
	if err := m.Check(); err != nil {
		t.Fatalf("Map().Check() = %v", err)
	}
	return m, before
}

// InLive fails the test unless each of blocks lies in a Live segment of
// m, whole.
func InLive(t testing.TB, m heapmap.Map, blocks [][]byte) {
	t.Helper()
	for _, b := range blocks {
		off := int64(Addr(b) - m.Base)
		s := segmentAt(m, off)
		if s.Kind != heapmap.Live || off+int64(len(b)) > s.End() {
			t.Fatalf("block [%d, %d) lies in %+v, want a live segment", off, off+int64(len(b)), s)
		}
	}
}

// segmentAt returns the segment of m that holds offset off.
func segmentAt(m heapmap.Map, off int64) heapmap.Segment {
	lo, hi := 0, len(m.Segments)
	for lo < hi {
		mid := (lo + hi) / 2
		if m.Segments[mid].End() <= off {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == len(m.Segments) {
		return heapmap.Segment{Off: off, Kind: heapmap.Reserved}
	}
	return m.Segments[lo]
}

// Connect runs the block-allocator article's connection scenario on h: n
// scratch buffers of 1 KiB and n sessions of 64 bytes, back to back, then
// the scratch buffers freed. It returns the sessions.
func Connect(t testing.TB, h interface {
	Alloc(size, align int) ([]byte, error)
	Free([]byte) error
}, n int) [][]byte {
	var scratch, sessions [][]byte
	for range n {
		s, err := h.Alloc(1024, 8)
		if err != nil {
			t.Fatal(err)
		}
		c, err := h.Alloc(64, 8)
		if err != nil {
			t.Fatal(err)
		}
		scratch, sessions = append(scratch, s), append(sessions, c)
	}
	for _, s := range scratch {
		if err := h.Free(s); err != nil {
			t.Fatal(err)
		}
	}
	return sessions
}
