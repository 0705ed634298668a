package gen

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/carvelab/carve/lab/trace"
)

// randFreeEvents runs randfree with args and returns its events.
func randFreeEvents(t *testing.T, args Args) []trace.Event {
	t.Helper()
	var w eventList
	if err := randFreeGen.Generate(&w, args); err != nil {
		t.Fatalf("Generate(%v) error: %v", args, err)
	}
	return w
}

type eventList []trace.Event

func (l *eventList) Write(e trace.Event) error { *l = append(*l, e); return nil }

// TestRandFree checks the shape of the trace: n allocations of sizes in
// [min, max] with IDs 1..n, then round(frac × n) frees of distinct live
// IDs, and nothing after; the live bytes at the end are those of the
// blocks not freed.
func TestRandFree(t *testing.T) {
	tests := []struct {
		name        string
		args        Args
		n, frees    int
		minSz, maxS uint64
	}{
		{"defaults", nil, 100000, 90000, 4096, 65536},
		{"small blocks", Args{"min": 16, "max": 256, "n": 5000}, 5000, 4500, 16, 256},
		{"one size", Args{"min": 100, "max": 100, "n": 1000, "frac": 0.5}, 1000, 500, 100, 100},
		{"none freed", Args{"n": 100, "frac": 0}, 100, 0, 4096, 65536},
		{"all freed", Args{"n": 100, "frac": 1}, 100, 100, 4096, 65536},
		{"rounded", Args{"n": 7, "frac": 0.5}, 7, 4, 4096, 65536}, // 3.5 rounds away from zero
		{"empty", Args{"n": 0}, 0, 0, 4096, 65536},
		{"zero sizes", Args{"min": 0, "max": 0, "n": 10}, 10, 9, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if raceEnabled && tt.n > 10000 {
				t.Skip("big run: checked without the race detector")
			}
			evs := randFreeEvents(t, tt.args)
			if len(evs) != tt.n+tt.frees {
				t.Fatalf("%d events, want %d allocs and %d frees", len(evs), tt.n, tt.frees)
			}
			live := map[uint64]uint64{}
			var bytes, lo, hi uint64 = 0, ^uint64(0), 0
			for i, e := range evs[:tt.n] {
				if e.Op != trace.Alloc || e.ID != uint64(i+1) || e.Align != 0 || e.Thread != 0 {
					t.Fatalf("event %d = %+v, want alloc of ID %d", i+1, e, i+1)
				}
				if e.Size < tt.minSz || e.Size > tt.maxS {
					t.Fatalf("event %d: size %d outside [%d, %d]", i+1, e.Size, tt.minSz, tt.maxS)
				}
				live[e.ID] = e.Size
				bytes += e.Size
				lo, hi = min(lo, e.Size), max(hi, e.Size)
			}
			for i, e := range evs[tt.n:] {
				size, ok := live[e.ID]
				if e.Op != trace.Free || !ok {
					t.Fatalf("event %d = %+v, want the free of a live block", tt.n+i+1, e)
				}
				delete(live, e.ID)
				bytes -= size
			}
			var want uint64
			for _, s := range live {
				want += s
			}
			if bytes != want {
				t.Errorf("live bytes at the end %d, want %d", bytes, want)
			}
			// Uniform sizes over thousands of draws reach both ends of a
			// range of 241 sizes.
			if tt.n >= 5000 && tt.maxS-tt.minSz <= 256 && (lo != tt.minSz || hi != tt.maxS) {
				t.Errorf("sizes from %d to %d, want the whole of [%d, %d]", lo, hi, tt.minSz, tt.maxS)
			}
		})
	}
}

// TestRandFreeRandom: the freed blocks are spread over the heap, and the
// order of the frees is not the order of the blocks.
func TestRandFreeRandom(t *testing.T) {
	const n = 10000
	evs := randFreeEvents(t, Args{"n": n, "frac": 0.5})
	var frees []uint64
	low := 0 // frees of blocks in the first half
	for _, e := range evs[n:] {
		frees = append(frees, e.ID)
		if e.ID <= n/2 {
			low++
		}
	}
	// Half of the 5,000 freed lie in the first half, give or take 5
	// standard deviations (35).
	if low < 2500-180 || low > 2500+180 {
		t.Errorf("%d of %d frees in the first half of the blocks, want about half", low, len(frees))
	}
	if slices.IsSorted(frees) || slices.IsSortedFunc(frees, func(a, b uint64) int { return int(b) - int(a) }) {
		t.Error("the frees come in the order of the blocks")
	}
	// The last block allocated, the top of a heap, is freed or not like
	// any other: over seeds, it is freed about half the time.
	topFreed := 0
	for seed := range 200 {
		evs := randFreeEvents(t, Args{"n": 100, "frac": 0.5, "seed": float64(seed)})
		for _, e := range evs[100:] {
			if e.ID == 100 {
				topFreed++
			}
		}
	}
	if topFreed < 60 || topFreed > 140 {
		t.Errorf("the last block freed by %d seeds of 200, want about 100", topFreed)
	}
}

// TestRandFreeSeed: a seed names a trace, sizes and order of the frees.
func TestRandFreeSeed(t *testing.T) {
	gen := func(args Args) string {
		var b bytes.Buffer
		w := trace.NewWriter(&b)
		if err := randFreeGen.Generate(w, args); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	first, again := gen(Args{"seed": 3, "n": 500}), gen(Args{"seed": 3, "n": 500})
	if first != again {
		t.Error("seed 3 twice gives two traces")
	}
	if other := gen(Args{"seed": 4, "n": 500}); first == other {
		t.Error("seeds 3 and 4 give the same trace")
	}
	// Same sizes (one size), another seed: the frees differ.
	if a, b := gen(Args{"seed": 3, "n": 500, "min": 8, "max": 8}), gen(Args{"seed": 4, "n": 500, "min": 8, "max": 8}); a == b {
		t.Error("seeds 3 and 4 free the blocks in the same order")
	}
}

// TestRandFreeArgs: min above max is refused by ParseArgs, Generate and
// Phases, before any event is written.
func TestRandFreeArgs(t *testing.T) {
	if _, err := randFreeGen.ParseArgs([]string{"min=300", "max=200"}); err == nil || !strings.Contains(err.Error(), "min = 300 is above max = 200") {
		t.Errorf("ParseArgs(min=300, max=200) error = %v, want min above max", err)
	}
	if _, err := randFreeGen.ParseArgs([]string{"min=70000"}); err == nil {
		t.Error("ParseArgs(min=70000) with the default max 65536 succeeded")
	}
	var w eventList
	if err := randFreeGen.Generate(&w, Args{"min": 2, "max": 1}); err == nil || len(w) != 0 {
		t.Errorf("Generate(min=2, max=1) = %v after %d events, want an error and none", err, len(w))
	}
	if _, err := randFreeGen.Phases(Args{"min": 2, "max": 1}); err == nil {
		t.Error("Phases(min=2, max=1) succeeded")
	}
	for _, kv := range [][]string{{"frac=1.5"}, {"frac=-0.1"}, {"n=0.5"}, {"min=-1"}} {
		if _, err := randFreeGen.ParseArgs(kv); err == nil {
			t.Errorf("ParseArgs(%q) succeeded", kv)
		}
	}
}

// TestRandFreePhases: the allocations, then the frees.
func TestRandFreePhases(t *testing.T) {
	for _, tt := range []struct {
		args Args
		want []Phase
	}{
		{Args{"n": 10}, []Phase{{"allocate", 10}, {"free", 19}}},
		{Args{"n": 10, "frac": 0}, []Phase{{"allocate", 10}}},
	} {
		got, err := randFreeGen.Phases(tt.args)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("Phases(%v) = %v, %v; want %v", tt.args, got, err, tt.want)
		}
		if evs := randFreeEvents(t, tt.args); int64(len(evs)) != got[len(got)-1].End {
			t.Errorf("Phases(%v) ends at %d, the trace at %d", tt.args, got[len(got)-1].End, len(evs))
		}
	}
}
