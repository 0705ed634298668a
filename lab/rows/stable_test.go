package rows

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/carvelab/carve/lab/replay"
)

// jsonHas reports whether the JSON object m has key, a key of m or of the
// objects under one of its keys ("phases[].resident": of every object of
// the array phases).
func jsonHas(t *testing.T, m map[string]any, key string) bool {
	t.Helper()
	outer, rest, nested := strings.Cut(key, ".")
	v, ok := m[strings.TrimSuffix(outer, "[]")]
	if !ok || !nested {
		return ok
	}
	switch v := v.(type) {
	case map[string]any:
		return jsonHas(t, v, rest)
	case []any:
		for _, e := range v {
			if !jsonHas(t, e.(map[string]any), rest) {
				return false
			}
		}
		return len(v) > 0
	}
	return false
}

// decode returns the JSON of r as an object.
func decode(t *testing.T, r Row) map[string]any {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return m
}

// TestStableJSON: a --stable row's JSON has none of the keys it leaves
// out, a figure not measured never reading as a 0, and keeps the rest;
// the same row's JSON in full has every one of them.
func TestStableJSON(t *testing.T) {
	frag := 12.5
	full := Row{
		Trace: "t", Allocator: "glibc", GOGC: 100,
		PeakRSS: 9, RSSRatio: 1.5, Events: 10, Ops: 9, NsPerOp: 20, PeakLive: 6, PeakFootprint: 8, PeakFootprintAt: 4,
		PeakResident: 9, PeakUsed: 7, FootprintAtPeakLive: 8, LiveAtPeakFootprint: 6,
		AvgRatio: 1.1, RatioAtPeakLive: 1.2, RatioAtPeakFP: 1.3, PeakRatio: 1.4, Fragmentation: &frag,
		Live: 5, Internal: 1, External: 2, PeakRSSHWM: 9, StartupFootprint: 3, StartupRSS: 4,
		Phases:     []Phase{{Name: "a", EndEvent: 5, Live: 5, Footprint: 8, Resident: 9}},
		Series:     []replay.Point{{Event: 10, Live: 6, Footprint: 8, Resident: 9}},
		PeakMarked: 6, MarkedRatio: 1.5,
		VsProgram: &VsProgram{RSS: 1},
		Routed:    &replay.Routed{Allocs: 1, PeakLive: 2, PeakFootprint: 3, IdleAtPeakFootprint: 1},
	}
	for _, measured := range []string{"in process", "child"} {
		r := full
		r.Measured = measured
		stable := r.ForStable()
		left := strings.Split(stable.Unstable, ", ")
		if !strings.Contains(stable.Unstable, "peak_rss_over_peak_live") || strings.Contains(stable.Unstable, "peak_footprint,") != (measured == "child") {
			t.Errorf("%s: Unstable = %q, want the headline left out, and the footprint for a child's row only", measured, stable.Unstable)
		}
		all, st := decode(t, r), decode(t, stable)
		for _, k := range left {
			if !jsonHas(t, all, k) {
				t.Errorf("%s: the full row's JSON has no %s", measured, k)
			}
			if jsonHas(t, st, k) {
				t.Errorf("%s: the --stable row's JSON has %s, which it leaves out", measured, k)
			}
		}
		for _, k := range []string{"trace", "allocator", "events", "peak_live", "live_at_end", "stable", "unstable_left_out", "phases[].live", "series[].live", "routed.peak_footprint"} {
			if !jsonHas(t, st, k) {
				t.Errorf("%s: the --stable row's JSON lacks %s", measured, k)
			}
		}
		if full.Phases[0].Resident == 0 || full.Series[0].Resident == 0 || full.Routed.IdleAtPeakFootprint == 0 {
			t.Errorf("%s: ForStable cleared the caller's phases, series or routes", measured)
		}
	}
}

// TestNoRSSJSON: a row whose RSS never rose above its baseline writes
// its peak RSS and headline as the 0 they measured, not left out.
func TestNoRSSJSON(t *testing.T) {
	r := Row{Trace: "t", Allocator: "glibc", Measured: "child", PeakLive: 100}
	r.setRSS(0)
	m := decode(t, r)
	for _, k := range []string{"peak_rss", "peak_rss_over_peak_live", "rss_note"} {
		if !jsonHas(t, m, k) {
			t.Errorf("JSON of a row of no RSS lacks %s: %v", k, m)
		}
	}
	if m["peak_rss"] != 0.0 {
		t.Errorf("peak_rss = %v, want 0", m["peak_rss"])
	}
}
