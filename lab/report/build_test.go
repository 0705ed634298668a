package report_test

import (
	"testing"

	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/report"
	"github.com/carvelab/carve/lab/rows"
	"github.com/carvelab/carve/lab/traces"
)

// TestHeapMapLive: the map the report draws speaks the table's
// vocabulary: its live bytes are the replay's live memory at that event,
// for every heap, the rounding up to each block's usable size shown apart.
func TestHeapMapLive(t *testing.T) {
	for _, arg := range []string{"gen:zipf:n=3000,seed=1", "gen:carving:n=2000", "gen:connection:n=1000,next=4096"} {
		tr, err := traces.Resolve(arg)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range replay.Names() {
			if name == "go" {
				continue // draws no map
			}
			for _, at := range []int64{500, 2500} {
				m, res, err := report.HeapMap(tr, rows.Spec{Alloc: name}, at)
				if err != nil {
					t.Fatalf("%s %s: %v", arg, name, err)
				}
				if err := m.Check(); err != nil {
					t.Fatalf("%s %s: %v", arg, name, err)
				}
				st := m.Stats()
				if st.Live != res.Live {
					t.Errorf("%s, %s after event %d: the map's live %d, the replay's %d (rounding %d)", arg, name, res.Events, st.Live, res.Live, st.Rounding)
				}
			}
		}
	}
}
