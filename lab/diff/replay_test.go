package diff_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carvelab/carve/lab/diff"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const (
	replayA = `{"schema": "carve.replay/v4", "rows": [
	{"trace": "conn.txt", "allocator": "glibc", "peak_rss": 2000, "peak_live": 1000},
	{"trace": "conn.txt", "allocator": "buddy", "peak_rss": 4000, "peak_live": 1000},
	{"trace": "conn.txt", "allocator": "best-fit", "peak_rss": 1500, "peak_live": 1000}]}`
	replayB = `{"schema": "carve.replay/v4", "rows": [
	{"trace": "conn.txt", "allocator": "glibc", "peak_rss": 1500, "peak_live": 900},
	{"trace": "conn.txt", "allocator": "buddy", "peak_rss": 4000, "peak_live": 900, "error": "exhausted"},
	{"trace": "conn.txt", "allocator": "jemalloc", "peak_rss": 1800, "peak_live": 900}]}`
)

// TestCompareReplays: rows matched by trace and allocator, or by
// allocator alone for one trace each under two names; the rows of one
// table only.
func TestCompareReplays(t *testing.T) {
	tests := []struct {
		name      string
		a, b      string
		matchedBy string
		rows      []string // "trace allocator A's peak RSS B's, its change" (- for none)
	}{
		{"same trace", replayA, replayB, diff.ByTraceAndAllocator, []string{
			"conn.txt glibc 2000 1500 -500", "conn.txt buddy 4000 4000 0", "conn.txt best-fit 1500 - -", "conn.txt jemalloc - 1800 -"}},
		{"one trace each, renamed", replayA, strings.ReplaceAll(replayB, "conn.txt", "after.txt"), diff.ByAllocator, []string{
			"conn.txt glibc 2000 1500 -500", "conn.txt buddy 4000 4000 0", "conn.txt best-fit 1500 - -", "after.txt jemalloc - 1800 -"}},
		{"two traces, none shared", replayA, strings.Replace(strings.ReplaceAll(replayB, "conn.txt", "after.txt"), `"after.txt", "allocator": "glibc"`, `"x", "allocator": "glibc"`, 1),
			diff.ByTraceAndAllocator, []string{
				"conn.txt glibc 2000 - -", "conn.txt buddy 4000 - -", "conn.txt best-fit 1500 - -", "x glibc - 1500 -", "after.txt buddy - 4000 -", "after.txt jemalloc - 1800 -"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := diff.ReadReplay(writeFile(t, "a.json", tc.a))
			if err != nil {
				t.Fatal(err)
			}
			b, err := diff.ReadReplay(writeFile(t, "b.json", tc.b))
			if err != nil {
				t.Fatal(err)
			}
			d := diff.CompareReplays(a, b)
			if d.MatchedBy != tc.matchedBy {
				t.Errorf("MatchedBy = %q, want %q", d.MatchedBy, tc.matchedBy)
			}
			var got []string
			for _, r := range d.Rows {
				rss := func(row *diff.ReplayRow) string {
					if row == nil {
						return "-"
					}
					return decimal(row.PeakRSS)
				}
				change := "-"
				if r.PeakRSS != nil {
					change = decimal(*r.PeakRSS.Change)
				}
				got = append(got, strings.Join([]string{r.Trace, r.Allocator, rss(r.A), rss(r.B), change}, " "))
			}
			if strings.Join(got, "; ") != strings.Join(tc.rows, "; ") {
				t.Errorf("rows:\n got %q\nwant %q", got, tc.rows)
			}
		})
	}
}

// TestReadReplayRefuses: JSON of another schema, or none, or not JSON.
func TestReadReplayRefuses(t *testing.T) {
	for _, tc := range []struct{ content, want string }{
		{`{"schema": "carve.advise/v1"}`, "schema carve.advise/v1, not a table of rows"},
		{`{"rows": []}`, "no schema field"},
		{`{"schema": "carve.replay/v4", "rows": [`, "not JSON carve reads"},
		{`{"schema": "carve.replay/v4"} {}`, "more than one JSON document"},
	} {
		path := writeFile(t, "r.json", tc.content)
		if !diff.IsReplay(path) {
			t.Errorf("IsReplay(%q) = false, want true", tc.content)
		}
		_, err := diff.ReadReplay(path)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), path+": ") {
			t.Errorf("ReadReplay(%q) = %v, want an error naming the file and saying %q", tc.content, err, tc.want)
		}
	}
	for _, content := range []string{"carve-trace 3\n", "", "  \n"} {
		if diff.IsReplay(writeFile(t, "t", content)) {
			t.Errorf("IsReplay(%q) = true, want false", content)
		}
	}
	if diff.IsReplay(filepath.Join(t.TempDir(), "missing")) {
		t.Error("IsReplay(a missing file) = true")
	}
}
