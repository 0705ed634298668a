package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/carvelab/carve/lab/advise"
)

// runAdvise runs carve advise with --format json and decodes its report,
// checking what every report must hold.
func runAdvise(t *testing.T, args ...string) advise.Advice {
	t.Helper()
	var out, errs bytes.Buffer
	if code := run(append([]string{"advise", "--format", "json", "--jobs", "2"}, args...), &out, &errs); code != 0 {
		t.Fatalf("carve advise %q: exit %d: %s", args, code, errs.String())
	}
	var adv advise.Advice
	if err := json.Unmarshal(out.Bytes(), &adv); err != nil {
		t.Fatalf("carve advise %q: %v\n%s", args, err, out.String())
	}
	checkAdvice(t, adv)
	return adv
}

// checkAdvice checks the invariants of a report: every suggestion saved
// at least the threshold and more than nothing, the peaks go down by the
// savings, and each pool's waste is its footprint less its live bytes.
func checkAdvice(t *testing.T, a advise.Advice) {
	t.Helper()
	if a.Schema != advise.Schema {
		t.Errorf("schema = %q, want %q", a.Schema, advise.Schema)
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
func sizes(a advise.Advice) []int {
	var s []int
	for _, p := range a.Pools {
		s = append(s, p.Size)
	}
	return s
}

// suggested returns the suggested pool of size bytes.
func suggested(a advise.Advice, size int) (advise.Pool, bool) {
	for _, p := range a.Pools {
		if p.Size == size {
			return p, true
		}
	}
	return advise.Pool{}, false
}

// TestAdviseScenarios replays the block-allocator article's scenarios, smaller, with a
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
			a := runAdvise(t, tt.trace, "--min", "1")
			for _, size := range tt.want {
				if p, ok := suggested(a, size); !ok || p.Saving <= 0 || p.Requests == 0 {
					t.Errorf("pools %v (%+v): want a pool of %d B with a positive saving and requests", sizes(a), p, size)
				}
			}
			if tt.first != 0 && (len(a.Pools) == 0 || a.Pools[0].Size != tt.first) {
				t.Errorf("pools %v: want %d B first", sizes(a), tt.first)
			}
			for _, size := range tt.not {
				if _, ok := suggested(a, size); ok {
					t.Errorf("pools %v: want none of %d B", sizes(a), size)
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
	a := runAdvise(t, "gen:connection:n=50,next=1024", "--min", "1")
	if len(a.Pools) != 0 || a.Go != "" {
		t.Errorf("pools %v, Go %q: want none", sizes(a), a.Go)
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
	a := runAdvise(t, path)
	if len(a.Candidates) != 0 || len(a.Pools) != 0 || len(a.Rounds) != 0 || !strings.Contains(a.Stop, "no size a pool could serve") {
		t.Errorf("candidates %v, pools %v, rounds %v, stop %q: want none, and why", a.Candidates, sizes(a), a.Rounds, a.Stop)
	}
}

// TestAdviseMax: --max bounds the suggestions; the default threshold
// (1%, 64 KiB at least) holds for what is suggested.
func TestAdviseMax(t *testing.T) {
	a := runAdvise(t, "gen:connection:n=5000,next=1024", "--min", "1", "--max", "1")
	if len(a.Pools) != 1 || !strings.Contains(a.Stop, "--max 1") {
		t.Errorf("pools %v, stop %q: want one, stopped by --max", sizes(a), a.Stop)
	}
	a = runAdvise(t, "gen:connection:n=5000,next=4096")
	if want := max(a.Baseline.PeakFootprint/100, 64<<10); a.Threshold != want {
		t.Errorf("default threshold %d, want %d", a.Threshold, want)
	}
}

// TestAdviseText checks the text report's parts.
func TestAdviseText(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"advise", "gen:carving:n=2000,smalls=1", "--min", "1%"}, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
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
	checkWidth(t, out.String(), false, "#", "size", "saving")
	out.Reset()
	if code := run([]string{"advise", "--wide", "gen:carving:n=2000,smalls=1", "--min", "1%"}, &out, &errs); code != 0 {
		t.Fatalf("--wide: exit %d: %s", code, errs.String())
	}
	checkWidth(t, out.String(), true, "#", "size", "saving", "requests", "peak footprint after", "pool footprint", "pool live", "waste")
}

// checkWidth checks carve advise's text: by default every line at most
// maxWidth columns (a tab to the next multiple of 8), with --wide
// (wide) lines as long as they come; either way a line of the table
// holds heads, in order.
func checkWidth(t *testing.T, out string, wide bool, heads ...string) {
	t.Helper()
	widest := 0
	for _, l := range strings.Split(out, "\n") {
		n := 0
		for _, r := range l {
			if n++; r == '\t' {
				n += 7 - (n-1)%8
			}
		}
		if widest = max(widest, n); n > maxWidth && !wide {
			t.Errorf("a line of %d columns, want at most %d:\n%s", n, maxWidth, l)
		}
	}
	if wide && widest <= maxWidth {
		t.Errorf("--wide: the widest line is %d columns, want the paragraphs whole, wider than %d:\n%s", widest, maxWidth, out)
	}
	quoted := make([]string, len(heads))
	for i, h := range heads {
		quoted[i] = regexp.QuoteMeta(h)
	}
	re := regexp.MustCompile(`(?m)^  ` + strings.Join(quoted, ` +`) + `( |$)`)
	if !re.MatchString(out) {
		t.Errorf("no line of the heads %q:\n%s", heads, out)
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
		name string
		args []string
		help bool // bad usage: the message points to carve help advise
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
			var errs bytes.Buffer
			code := run(append([]string{"advise"}, tt.args...), io.Discard, &errs)
			if code != 2 {
				t.Errorf("carve advise %q: exit code %d, want 2: %s", tt.args, code, errs.String())
			}
			if got := strings.Contains(errs.String(), "carve help advise"); got != tt.help {
				t.Errorf("carve advise %q: points to the help %t, want %t: %s", tt.args, got, tt.help, errs.String())
			}
		})
	}
}

// TestAdviseBaseFails: a base that cannot serve the trace (over its
// limit) is a measurement, as a failed row of carve replay is: exit 0, and
// the advice says why there is none.
func TestAdviseBaseFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.trace")
	if err := os.WriteFile(path, []byte("# carve trace v1\na 1 2000000000\nf 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"advise", path}, &stdout, &stderr)
	if code != 0 || !strings.Contains(stdout.String(), "best-fit failed on the trace") {
		t.Errorf("carve advise of a trace over best fit's limit: exit %d, %q %q", code, stdout.String(), stderr.String())
	}
	if code := run([]string{"replay", "--alloc", "best-fit", path}, &stdout, &stderr); code != 0 {
		t.Errorf("carve replay of the same: exit %d, want 0 as carve advise", code)
	}
}
