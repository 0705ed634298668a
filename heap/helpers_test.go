package heap_test

import (
	"testing"

	"github.com/carvelab/carve/heap"
	"github.com/carvelab/carve/heapmap"
)

// newHeap returns a heap with opts, closed at the end of the test.
func newHeap(t testing.TB, opts ...heap.Option) *heap.Heap {
	t.Helper()
	h, err := heap.New(opts...)
	if err != nil {
		t.Fatalf("New() = %v, want nil", err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// checkStats verifies the equations the Stats doc states, and returns the
// statistics.
func checkStats(t testing.TB, h *heap.Heap) heap.Stats {
	t.Helper()
	st := h.Stats()
	var slots, slotBytes, slabs int64
	for _, c := range st.Classes {
		if c.Slots > c.Slabs*int64(c.PerSlab) {
			t.Fatalf("Stats(): the %d-byte class has %d slots in use in %d slabs of %d", c.Size, c.Slots, c.Slabs, c.PerSlab)
		}
		slots += c.Slots
		slotBytes += c.Slots * int64(c.Size)
		slabs += c.Slabs
	}
	switch {
	case slots != st.Slots || slotBytes != st.SlotBytes || slabs != st.Slabs:
		t.Fatalf("Stats() = %d slots of %d bytes in %d slabs, the classes add up to %d of %d in %d", st.Slots, st.SlotBytes, st.Slabs, slots, slotBytes, slabs)
	case st.Used != st.SlotBytes+st.BlockBytes || st.HeaderBytes != 8*st.Blocks:
		t.Fatalf("Stats() = Used %d, SlotBytes %d, BlockBytes %d, HeaderBytes %d for %d blocks: want Used = SlotBytes + BlockBytes, HeaderBytes = 8 Blocks",
			st.Used, st.SlotBytes, st.BlockBytes, st.HeaderBytes, st.Blocks)
	case st.Footprint != st.Committed-st.Clean-st.Meshed:
		t.Fatalf("Stats() = Footprint %d, Committed %d, Clean %d, Meshed %d: want Footprint = Committed - Clean - Meshed", st.Footprint, st.Committed, st.Clean, st.Meshed)
	case st.Live < 0 || st.Live > st.Used-st.HeaderBytes || st.Used > st.Footprint || st.Resident > st.Footprint || st.Dirty > st.Footprint-st.Used:
		t.Fatalf("Stats() = Live %d, Used %d, HeaderBytes %d, Footprint %d, Resident %d, Dirty %d: want 0 <= Live <= Used - HeaderBytes <= Footprint, Resident <= Footprint, Dirty <= Footprint - Used",
			st.Live, st.Used, st.HeaderBytes, st.Footprint, st.Resident, st.Dirty)
	case st.Footprint > h.Limit() || st.Largest > st.FreeBytes:
		t.Fatalf("Stats() = Footprint %d, Largest %d, FreeBytes %d: want Footprint <= Limit %d, Largest <= FreeBytes", st.Footprint, st.Largest, st.FreeBytes, h.Limit())
	case h.Footprint() != st.Footprint || h.Metadata() != st.Metadata:
		t.Fatalf("Footprint() = %d, Metadata() = %d; Stats() says %d, %d", h.Footprint(), h.Metadata(), st.Footprint, st.Metadata)
	}
	return st
}

// checkMap verifies the heap's map against its statistics.
func checkMap(t testing.TB, h *heap.Heap) heapmap.Map {
	t.Helper()
	m := h.Map()
	if err := m.Check(); err != nil {
		t.Fatalf("Map().Check() = %v, want nil", err)
	}
	ms, st := m.Stats(), h.Stats()
	if ms.Live+ms.Header != st.Used || ms.Header != st.HeaderBytes || m.Size-ms.Reserved != st.Footprint || m.Size != st.Committed {
		t.Fatalf("Map() = %+v of %d bytes; Stats() = Used %d, HeaderBytes %d, Footprint %d, Committed %d: want Live + Header = Used, Header = HeaderBytes, Size - Reserved = Footprint, Size = Committed",
			ms, m.Size, st.Used, st.HeaderBytes, st.Footprint, st.Committed)
	}
	return m
}
