package main

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/carvelab/carve/lab/advise"
	"github.com/carvelab/carve/lab/rows"
)

// goTrace is a Go program's recorded trace, its objects labelled.
const goTrace = "../../lab/trace/testdata/labelled/go.trace"

// TestPacedBaseline: a go row with a type moved off it, on a trace that
// records the program's collections, gets the go row paced by the same
// model beside it (the program-collected one stays too), and the text
// compares the what-if with the paced row. On a trace without
// collections no paced row is added.
func TestPacedBaseline(t *testing.T) {
	if testing.Short() {
		t.Skip("replays the Go heap in child processes")
	}
	var got []string
	for _, r := range replayRows(t, "replay", "--alloc", "go", "--heap", "type=main.session", "--format", "json", goTrace) {
		got = append(got, r.Allocator+" "+r.Collected)
	}
	if want := []string{"go program", "go(paced) paced", "go+heap(type=main.session) paced"}; !slices.Equal(got, want) {
		t.Fatalf("rows %q, want %q", got, want)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"replay", "--alloc", "go", "--heap", "type=main.session", goTrace}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "go+heap(type=main.session): peak RSS") || !strings.Contains(stdout.String(), "go(paced)'s") {
		t.Errorf("the verdict does not compare the what-if with go(paced):\n%s", stdout.String())
	}

	stdout.Reset()
	if code := run([]string{"replay", "--alloc", "go", "--pool", "64", "--format", "csv", "gen:connection:n=200"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if strings.Contains(stdout.String(), "paced") {
		t.Errorf("a paced row on a trace without collections:\n%s", stdout.String())
	}
}

// TestRouteByType replays a recorded Go trace with a type routed to a
// pool, and checks the rows' names and their live figures (the same
// trace); a type the trace does not have is an error that names it.
func TestRouteByType(t *testing.T) {
	var doc struct{ Rows []rows.Row }
	doc.Rows = replayRows(t, "replay", "--alloc", "first-fit", "--pool", "type=main.session", "--format", "json", goTrace)
	var stdout, stderr bytes.Buffer
	if len(doc.Rows) != 2 || doc.Rows[0].Allocator != "first-fit" || doc.Rows[1].Allocator != "first-fit+pool(type=main.session)" {
		t.Fatalf("rows %+v, want first-fit and first-fit+pool(type=main.session)", doc.Rows)
	}
	for _, r := range doc.Rows {
		if r.Error != "" || r.TraceErrors != 0 || r.PeakLive != doc.Rows[0].PeakLive {
			t.Errorf("row %s: error %q, %d trace errors, peak live %d (first row's %d)", r.Allocator, r.Error, r.TraceErrors, r.PeakLive, doc.Rows[0].PeakLive)
		}
	}

	for _, tc := range []struct {
		args []string
		exit int
		want string
	}{
		{[]string{"replay", "--alloc", "first-fit", "--pool", "type=main.nosuch", goTrace}, 2, `no type "main.nosuch" in ` + goTrace},
		{[]string{"replay", "--alloc", "first-fit", "--pool", "type=main.session", "--arena", "type=main.session", goTrace}, 2, "type main.session given twice"},
	} {
		stdout.Reset()
		stderr.Reset()
		code := run(tc.args, &stdout, &stderr)
		if code != tc.exit || !strings.Contains(stdout.String()+stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, output %q %q; want exit %d and %q", tc.args, code, stdout.String(), stderr.String(), tc.exit, tc.want)
		}
	}
}

// TestAdviseGoTrace: carve advise on a Go trace advises on its types,
// on the Go heap, and refuses the types that hold pointers.
func TestAdviseGoTrace(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"advise", "--repeats", "1", "--types", "2", "--format", "json", goTrace}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var adv struct {
		Schema string `json:"schema"`
		Base   string `json:"base"`
		Tried  []struct {
			Type            string
			SavingLowBytes  int64 `json:"saving_low_bytes"`
			SavingHighBytes int64 `json:"saving_high_bytes"`
			Bounds          []advise.Bound
			Skipped         bool
		}
		Refused []struct{ Type string }
		Program *advise.Measured `json:"program_collected"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &adv); err != nil {
		t.Fatal(err)
	}
	// The trace records the program's collections: the baseline is
	// paced by the model, and every move replayed has its bounds, for
	// the pool, the arena and, for uint8 (of many sizes), a heap; a
	// type too small to save 64 KiB is not replayed.
	if adv.Schema != advise.TypesSchema || adv.Base != "go(paced)" || len(adv.Tried) != 2 {
		t.Fatalf("advice %+v: want %s on go(paced), 2 types tried", adv, advise.TypesSchema)
	}
	for _, tr := range adv.Tried {
		var into []string
		for _, b := range tr.Bounds {
			into = append(into, b.Into)
		}
		slices.Sort(into)
		want := []string{"arena", "pool"}
		if tr.Type == "uint8" {
			want = []string{"arena", "heap", "pool"}
		}
		switch {
		case tr.Skipped:
			if len(tr.Bounds) != 0 {
				t.Errorf("%s: not replayed, but with bounds %+v", tr.Type, tr.Bounds)
			}
		case !slices.Equal(into, want) || tr.SavingLowBytes > tr.SavingHighBytes:
			t.Errorf("%s: bounds %+v, low %d, high %d: want a range into each of %v", tr.Type, tr.Bounds, tr.SavingLowBytes, tr.SavingHighBytes, want)
		}
	}
	if adv.Program == nil {
		t.Errorf("no baseline collected where the program did")
	}
	refused := false
	for _, r := range adv.Refused {
		refused = refused || r.Type == "main.conn"
	}
	if !refused {
		t.Errorf("main.conn (it holds a pointer) not refused: %+v", adv.Refused)
	}
	// --base keeps the size advice.
	stdout.Reset()
	if code := run([]string{"advise", "--base", "first-fit", "--format", "json", goTrace}, &stdout, &stderr); code != 0 || strings.Contains(stdout.String(), "advise-types") {
		t.Errorf("advise --base first-fit on a Go trace: exit %d, %.200s", code, stdout.String())
	}
}

// TestRecordFromErrors: carve record --from with a COMMAND, without a
// duration, or at an address where nothing listens is an input error
// (exit 2) that says what to do, and writes no file.
func TestRecordFromErrors(t *testing.T) {
	out := t.TempDir() + "/service.trace"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"record", "-o", out, "--from", "127.0.0.1:1", "--", "true"}, "no COMMAND"},
		{[]string{"record", "-o", out, "--from", "127.0.0.1:1", "--seconds", "0"}, "--seconds 0"},
		{[]string{"record", "-o", out, "--from", "127.0.0.1:1", "--seconds", "0.1"}, "nothing listens at 127.0.0.1:1"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s written by a failed recording", out)
	}
}
