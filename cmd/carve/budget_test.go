package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/carvelab/carve/mem"
)

// TestRunBudget: a trace of one request under --max-request (default:
// half the physical memory) but more than the run's budget can give a row
// (3 times its peak live memory) fails at once with the budget's error,
// at --jobs 2 as at 1: the rows running at once never hold more than
// half the physical memory. (--touch=false, so that the carve of before,
// which replayed it, did so without taking the memory.)
func TestRunBudget(t *testing.T) {
	phys, err := mem.Physical()
	if err != nil {
		t.Skip(err)
	}
	p := filepath.Join(t.TempDir(), "big.trace")
	request := phys * 2 / 5 &^ 4095
	if err := os.WriteFile(p, fmt.Appendf(nil, "# carve trace v1\na 1 %d\nf 1\n", request), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, jobs := range []string{"1", "2"} {
		code, stdout, stderr, rss := carveProcess(t, "replay", "--progress=false", "--touch=false", "--jobs", jobs, "--alloc", "heap,go", p)
		if code != 2 || strings.Count(stdout, "over the memory budget") != 2 || !strings.Contains(stdout, "half the physical memory") || rss > 1<<30 {
			t.Errorf("--jobs %s, a request of %d: exit %d, %d MiB, want 2 and each row refused by the budget:\n%s%s", jobs, request, code, rss>>20, stdout, stderr)
		}
	}
}

// TestHeaptrackRecordsDecodedOnce: a heaptrack file of 2^24 allocation
// records and nothing else (kilobytes of zstd) costs the run its decoder
// once, not once per row: under 1 GiB at --jobs 4, where each of the four
// rows decoding it took 1.4 GB; and the error names the records.
func TestHeaptrackRecordsDecodedOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes 2^24 records")
	}
	var b bytes.Buffer
	w, err := zstd.NewWriter(&b, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("v 10400 3\nX ./prog\n"))
	chunk := bytes.Repeat([]byte("a 1 1\n"), 1<<16)
	for range 1<<24/(1<<16) + 1 {
		w.Write(chunk)
	}
	w.Close()
	p := filepath.Join(t.TempDir(), "records.zst")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	limit := int64(1 << 30)
	if raceEnabled {
		limit = 8 << 30
	}
	code, stdout, stderr, rss := carveProcess(t, "replay", "--progress=false", "--jobs", "4", "--alloc", "best-fit,first-fit,next-fit,heap", p)
	if code != 2 || rss > limit || !strings.Contains(stdout, "too many allocation records") {
		t.Errorf("exit %d, %d MiB resident, want 2 under %d MiB and the records named:\n%s%s", code, rss>>20, limit>>20, stdout, stderr)
	}
}

// TestScenarioSkipped: a scenario whose requests pass --max-request says
// they were skipped, rather than print them as allocated buffers that
// grew nothing.
func TestScenarioSkipped(t *testing.T) {
	phys, err := mem.Physical()
	if err != nil {
		t.Skip(err)
	}
	code, stdout, stderr, _ := carveProcess(t, "scenario", "connection", "--n", "3", "--next", strconv.FormatInt(phys, 10), "--alloc", "best-fit,go")
	if code != 0 || strings.Count(stdout, "3 of the scenario's requests were skipped, not allocated") != 2 || !strings.Contains(stdout, "--max-request") {
		t.Errorf("buffers above --max-request: exit %d, want 0 and each line saying they were skipped:\n%s%s", code, stdout, stderr)
	}
}

// TestCountBounds: a count that would make a run without end is a usage
// error naming its limit.
func TestCountBounds(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"advise", "--repeats", "100000", "gen:connection:n=10"}, "--repeats 100000: want 1 to 50"},
		{[]string{"scenario", "connection", "--n", "1000000000000"}, "--n 1000000000000: want 1 to 10000000"},
		{[]string{"lab", "--n", "1000000000000"}, "--n 1000000000000: want 1 to 10000000"},
	} {
		code, stdout, stderr, _ := carveProcess(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("carve %q: exit %d, want 2 and %q:\n%s%s", tc.args, code, tc.want, stdout, stderr)
		}
	}
}
