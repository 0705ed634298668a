package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/carvelab/carve/lab/replay"
)

// advise runs carve advise with --format json and decodes its report,
// checking what every report must hold.
func advise(t *testing.T, args ...string) advice {
	t.Helper()
	var out bytes.Buffer
	if err := cmdAdvise(append(args, "--format", "json", "--jobs", "2"), &out, io.Discard); err != nil {
		t.Fatalf("carve advise %q: %v", args, err)
	}
	var adv advice
	if err := json.Unmarshal(out.Bytes(), &adv); err != nil {
		t.Fatalf("carve advise %q: %v\n%s", args, err, out.String())
	}
	checkAdvice(t, adv)
	return adv
}

// checkAdvice checks the invariants of a report: every suggestion saved
// at least the threshold and more than nothing, the peaks go down by the
// savings, and each pool's waste is its footprint less its live bytes.
func checkAdvice(t *testing.T, a advice) {
	t.Helper()
	if a.Schema != adviseSchema {
		t.Errorf("schema = %q, want %q", a.Schema, adviseSchema)
	}
	peak := a.Baseline.PeakFootprint
	for i, p := range a.Pools {
		if p.Saving <= 0 || p.Saving < a.Threshold {
			t.Errorf("pool %d (%d B): saving %d, want at least the threshold %d and more than 0", i+1, p.Size, p.Saving, a.Threshold)
		}
		if peak -= p.Saving; p.PeakFootprint != peak {
			t.Errorf("pool %d (%d B): peak footprint %d, want the one before less the saving, %d", i+1, p.Size, p.PeakFootprint, peak)
		}
		if p.Waste != p.Footprint-p.Live || p.Live < 0 || p.Live > p.Footprint {
			t.Errorf("pool %d (%d B): waste %d, footprint %d, live %d: want 0 <= live <= footprint, waste = footprint - live", i+1, p.Size, p.Waste, p.Footprint, p.Live)
		}
		if !strings.Contains(a.Go, "pool.New("+strconv.Itoa(p.Size)+", pool.Limit(") {
			t.Errorf("the Go snippet makes no pool of %d B:\n%s", p.Size, a.Go)
		}
	}
	if a.FinalPeakFootprint != peak {
		t.Errorf("final peak footprint %d, want %d", a.FinalPeakFootprint, peak)
	}
}

// sizes returns the sizes of the suggested pools, in order.
func (a advice) sizes() []int {
	var s []int
	for _, p := range a.Pools {
		s = append(s, p.Size)
	}
	return s
}

// pool returns the suggested pool of size bytes.
func (a advice) pool(size int) (advisedPool, bool) {
	for _, p := range a.Pools {
		if p.Size == size {
			return p, true
		}
	}
	return advisedPool{}, false
}

// TestAdviseScenarios replays the seeds' scenarios, smaller, with a
// threshold of 1 byte: any pool that lowers the peak is suggested.
func TestAdviseScenarios(t *testing.T) {
	tests := []struct {
		trace string
		want  []int // pools that must be suggested, with a positive saving
		first int   // the first pool, when the measurement leaves no doubt (0: any)
		not   []int // pools that must not be suggested
	}{
		// The 1 KiB buffers fit the holes, in a heap or in a pool: a pool
		// saves the 16 bytes of each block's header and rounding, less
		// the unused tail of its last slab, and so does one for the
		// sessions.
		{trace: "gen:connection:n=5000,next=1024", want: []int{1024, 64}},
		// The 4 KiB buffers fit no hole. With the sessions in a pool the
		// freed scratch buffers coalesce and the heap reuses them; with
		// the scratch buffers in a pool, their chunks stay there, of no
		// use to the 4 KiB buffers: after the sessions' pool, the scratch
		// buffers' pool costs their whole size.
		{trace: "gen:connection:n=5000,next=4096", want: []int{64}, first: 64, not: []int{1024}},
		// The second wave of 1 KiB buffers reuses the first's chunks.
		{trace: "gen:carving:n=5000,smalls=1", want: []int{1024}},
	}
	for _, tt := range tests {
		t.Run(tt.trace, func(t *testing.T) {
			a := advise(t, tt.trace, "--min", "1")
			for _, size := range tt.want {
				if p, ok := a.pool(size); !ok || p.Saving <= 0 || p.Requests == 0 {
					t.Errorf("pools %v (%+v): want a pool of %d B with a positive saving and requests", a.sizes(), p, size)
				}
			}
			if tt.first != 0 && (len(a.Pools) == 0 || a.Pools[0].Size != tt.first) {
				t.Errorf("pools %v: want %d B first", a.sizes(), tt.first)
			}
			for _, size := range tt.not {
				if _, ok := a.pool(size); ok {
					t.Errorf("pools %v: want none of %d B", a.sizes(), size)
				}
			}
		})
	}
}

// TestAdviseNoPool: 50 connections take less than the heap's first
// commitment (its 64 KiB top pad included); a pool for either size adds a
// 64 KiB slab of its own, while the heap, still serving the other size,
// keeps its commitment. No pool lowers the peak.
func TestAdviseNoPool(t *testing.T) {
	a := advise(t, "gen:connection:n=50,next=1024", "--min", "1")
	if len(a.Pools) != 0 || a.Go != "" {
		t.Errorf("pools %v, Go %q: want none", a.sizes(), a.Go)
	}
	if len(a.Rounds) != 1 || len(a.Rounds[0]) != 2 || a.Rounds[0][0].Saving >= 0 {
		t.Errorf("rounds %+v: want one round of two replays, both costing", a.Rounds)
	}
	if !strings.Contains(a.Stop, "no remaining candidate lowers the peak") {
		t.Errorf("stop = %q, want why", a.Stop)
	}
}

// TestAdviseNoCandidate: requests too small for a pool's chunk, or
// aligned beyond 8, leave nothing to replay.
func TestAdviseNoCandidate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "small.trace")
	if err := os.WriteFile(path, []byte("# carve trace v1\na 1 4\nm 2 64 100\na 3 100 16\nf 1\nf 2\nf 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := advise(t, path)
	if len(a.Candidates) != 0 || len(a.Pools) != 0 || len(a.Rounds) != 0 || !strings.Contains(a.Stop, "no size a pool could serve") {
		t.Errorf("candidates %v, pools %v, rounds %v, stop %q: want none, and why", a.Candidates, a.sizes(), a.Rounds, a.Stop)
	}
}

// TestAdviseMax: --max bounds the suggestions; the default threshold
// (1%, 64 KiB at least) holds for what is suggested.
func TestAdviseMax(t *testing.T) {
	a := advise(t, "gen:connection:n=5000,next=1024", "--min", "1", "--max", "1")
	if len(a.Pools) != 1 || !strings.Contains(a.Stop, "--max 1") {
		t.Errorf("pools %v, stop %q: want one, stopped by --max", a.sizes(), a.Stop)
	}
	a = advise(t, "gen:connection:n=5000,next=4096")
	if want := max(a.Baseline.PeakFootprint/100, 64<<10); a.Threshold != want {
		t.Errorf("default threshold %d, want %d", a.Threshold, want)
	}
}

// TestAdviseText checks the text report's parts.
func TestAdviseText(t *testing.T) {
	var out bytes.Buffer
	if err := cmdAdvise([]string{"gen:carving:n=2000,smalls=1", "--min", "1%"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"carve advise: gen:carving:n=2000,smalls=1, pools in front of best-fit",
		"without the correctness checks",
		"baseline: peak footprint",
		"round 1, saving per candidate:",
		"suggested pools",
		"final: peak footprint",
		"stopped:",
		"pool.New(64, pool.Limit(",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// TestAdviseStackMatchesReplay: the meters the advisor puts around each
// layer change nothing: its peak footprint is carve replay's for the same
// pools, and its pools' figures add up.
func TestAdviseStackMatchesReplay(t *testing.T) {
	s, err := parseSource("gen:connection:n=3000,next=4096")
	if err != nil {
		t.Fatal(err)
	}
	c := adviseConfig{src: s, base: "best-fit"}
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
	src, closer, err := s.open()
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
		var th threshold
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
	for _, bad := range []string{"", "x", "-1", "1.5KiB", "101%", "-2%", "1TiB", "NaN%"} {
		var th threshold
		if err := th.Set(bad); err == nil {
			t.Errorf("Set(%q) = nil, want an error", bad)
		}
	}
}

// TestAdviseErrors checks the exit codes: 2 for bad usage and for a trace
// that cannot be read.
func TestAdviseErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.trace")
	if err := os.WriteFile(bad, []byte("# carve trace v1\na 1 100\na 2 lots\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		args  []string
		usage bool // a usageError; otherwise an inputError
	}{
		{"no trace", nil, true},
		{"two traces", []string{"gen:bump:n=10", "gen:bump:n=20"}, true},
		{"unknown base", []string{"gen:bump:n=10", "--base", "nosuch"}, true},
		{"real malloc as base", []string{"gen:bump:n=10", "--base", "glibc"}, true},
		{"bad format", []string{"gen:bump:n=10", "--format", "csv"}, true},
		{"bad max", []string{"gen:bump:n=10", "--max", "0"}, true},
		{"bad min", []string{"gen:bump:n=10", "--min", "lots"}, true},
		{"bad jobs", []string{"gen:bump:n=10", "--jobs", "0"}, true},
		{"unknown flag", []string{"gen:bump:n=10", "--frobnicate"}, true},
		{"missing file", []string{filepath.Join(dir, "nosuch.trace")}, false},
		{"unknown generator", []string{"gen:nosuch"}, false},
		{"malformed trace", []string{bad}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := cmdAdvise(tt.args, io.Discard, io.Discard)
			var u usageError
			var in inputError
			switch {
			case tt.usage && !errors.As(err, &u):
				t.Errorf("carve advise %q = %v, want a usage error", tt.args, err)
			case !tt.usage && !errors.As(err, &in):
				t.Errorf("carve advise %q = %v, want an input error", tt.args, err)
			}
			if code := exitCode(err, io.Discard); code != 2 {
				t.Errorf("carve advise %q: exit code %d, want 2", tt.args, code)
			}
		})
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
	s, err := parseSource(path)
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
	want := []sizeCount{{16, 5, 80}, {100000, 1, 100000}}
	if !slices.Equal(got, want) {
		t.Errorf("poolCandidates(1) = %v, want %v", got, want)
	}
	if len(held) != id+2 {
		t.Errorf("held %d events, want %d", len(held), id+2)
	}
	got, _, err = poolCandidates(s, 8)
	if err != nil {
		t.Fatal(err)
	}
	want = []sizeCount{{16, 5, 80}, {32, 4, 128}, {48, 4, 192}, {100000, 1, 100000}}
	if !slices.Equal(got, want) {
		t.Errorf("poolCandidates(8) = %v, want %v", got, want)
	}
}
