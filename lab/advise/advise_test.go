package advise

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/traces"
)

// TestAdviseStackMatchesReplay: the meters the advisor puts around each
// layer change nothing: its peak footprint is replay.WithPool's for the same
// pools, and its pools' figures add up.
func TestAdviseStackMatchesReplay(t *testing.T) {
	s, err := traces.Resolve("gen:connection:n=3000,next=4096")
	if err != nil {
		t.Fatal(err)
	}
	c := &advisor{Config: Config{Trace: s, Base: "best-fit"}}
	got := c.replay([]int{64, 1024})
	if got.err != nil {
		t.Fatal(got.err)
	}

	a, err := replay.New("best-fit")
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{64, 1024} {
		if a, err = replay.WithPool(size, a); err != nil {
			t.Fatal(err)
		}
	}
	defer a.Close()
	src, closer, err := s.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	want, err := replay.Run(src, a, replay.Options{NoCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.res.PeakFootprint != want.PeakFootprint || got.res.PeakLive != want.PeakLive {
		t.Errorf("advisor's replay: peak footprint %d, peak live %d; replay.WithPool's: %d, %d", got.res.PeakFootprint, got.res.PeakLive, want.PeakFootprint, want.PeakLive)
	}
	for i, wantReqs := range []int64{3000, 3000} {
		if p := got.pools[i]; p.Requests != wantReqs || p.Footprint > p.MaxFootprint || p.Waste != p.Footprint-p.Live {
			t.Errorf("pool %d: %+v: want %d requests, footprint <= max, waste = footprint - live", i, p, wantReqs)
		}
	}
}

// TestAdviseMeter follows one block through a pool's stack: allocated in
// the pool, moved to the base by a realloc, back, and freed.
func TestAdviseMeter(t *testing.T) {
	base, err := replay.New("best-fit")
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{layers: []*meter{{a: base}}}
	defer s.Close()
	if err := s.push(64); err != nil {
		t.Fatal(err)
	}
	check := func(step string, poolLive, baseLive, requests int64) {
		t.Helper()
		s.Footprint()
		if got := s.layers[1].live - s.layers[0].live; got != poolLive || s.layers[0].live != baseLive || s.layers[1].requests != requests {
			t.Errorf("after %s: pool live %d, base live %d, requests %d; want %d, %d, %d", step, got, s.layers[0].live, s.layers[1].requests, poolLive, baseLive, requests)
		}
	}
	b, err := s.Alloc(64, 0)
	if err != nil {
		t.Fatal(err)
	}
	check("Alloc(64, 0)", 64, 0, 1)
	if b, err = s.Realloc(b, 200); err != nil {
		t.Fatal(err)
	}
	check("Realloc(b, 200)", 0, 200, 1)
	if b, err = s.Realloc(b, 64); err != nil {
		t.Fatal(err)
	}
	check("Realloc(b, 64)", 64, 0, 2)
	if err := s.Free(b); err != nil {
		t.Fatal(err)
	}
	check("Free(b)", 0, 0, 2)
	if s.pools[0].Footprint == 0 || s.pools[0].MaxFootprint != s.pools[0].Footprint {
		t.Errorf("pool at the peak: %+v: want its slab", s.pools[0])
	}
}

func TestAdviseThreshold(t *testing.T) {
	tests := []struct {
		flag string
		peak int64
		want int64
	}{
		{"", 100 << 20, 1 << 20},
		{"", 1 << 20, 64 << 10},
		{"2%", 100 << 20, 2 << 20},
		{"0.5%", 1000, 5},
		{"65536", 1 << 30, 65536},
		{"64KiB", 1 << 30, 64 << 10},
		{"3MiB", 1 << 30, 3 << 20},
		{"1GiB", 0, 1 << 30},
		{"100B", 0, 100},
		{"0", 1 << 30, 0},
	}
	for _, tt := range tests {
		var th Threshold
		if tt.flag != "" {
			if err := th.Set(tt.flag); err != nil {
				t.Errorf("Set(%q) = %v", tt.flag, err)
				continue
			}
		}
		if got := th.of(tt.peak); got != tt.want {
			t.Errorf("--min %q of %d = %d, want %d", tt.flag, tt.peak, got, tt.want)
		}
	}
	for _, bad := range []string{"", "x", "-1", "1.5KiB", "101%", "-2%", "8388608TiB", "NaN%"} {
		var th Threshold
		if err := th.Set(bad); err == nil {
			t.Errorf("Set(%q) = nil, want an error", bad)
		}
	}
}

// TestAdviseCandidates: the most requested sizes and the ones taking the
// most bytes, most requested first; unpoolable requests left out.
func TestAdviseCandidates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sizes.trace")
	var b strings.Builder
	b.WriteString("# carve trace v1\n")
	id := 0
	for _, sz := range []struct{ size, n int }{{16, 5}, {32, 4}, {100000, 1}, {4, 9}, {48, 3}} {
		for range sz.n {
			id++
			b.WriteString("a " + strconv.Itoa(id) + " " + strconv.Itoa(sz.size) + "\n")
		}
	}
	b.WriteString("m 99 64 48\nr 1 48\n")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := traces.Resolve(path)
	if err != nil {
		t.Fatal(err)
	}
	got, held, err := poolCandidates(s, 1)
	if err != nil {
		t.Fatal(err)
	}
	// By requests: 16 (5); by bytes: 100000. The 4-byte requests are too
	// small for a chunk; the memalign(64) of 48 does not count, the
	// realloc to 48 does.
	want := []SizeCount{{16, 5, 80, nil}, {100000, 1, 100000, nil}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("poolCandidates(1) = %v, want %v", got, want)
	}
	if len(held) != id+2 {
		t.Errorf("held %d events, want %d", len(held), id+2)
	}
	got, _, err = poolCandidates(s, 8)
	if err != nil {
		t.Fatal(err)
	}
	want = []SizeCount{{16, 5, 80, nil}, {32, 4, 128, nil}, {48, 4, 192, nil}, {100000, 1, 100000, nil}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("poolCandidates(8) = %v, want %v", got, want)
	}
}
