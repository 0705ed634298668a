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
// on the Go heap, each in the moves that fit it, and refuses the types
// that hold pointers; by default no type under the floor is tried.
func TestAdviseGoTrace(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"advise", "--repeats", "1", "--types", "2", "--min-type", "0", "--format", "json", goTrace}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "replays of the whole trace") {
		t.Errorf("advise did not say how many replays it makes: %s", stderr.String())
	}
	var adv struct {
		Schema     string `json:"schema"`
		Base       string `json:"base"`
		FloorBytes int64  `json:"floor_bytes"`
		Tried      []struct {
			Type    string
			Bytes   int64 `json:"bytes_at_peak"`
			Targets []advise.Target
		}
		Refused []struct{ Type string }
		Program *advise.Measured `json:"program_collected"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &adv); err != nil {
		t.Fatal(err)
	}
	// The trace records the program's collections: the baseline is
	// paced by the model, and every move replayed has its bounds: a
	// slice's into a heap and pools, a struct's into pool.NewOf and a
	// heap.
	if adv.Schema != advise.TypesSchema || adv.Base != "go(paced)" || len(adv.Tried) != 2 || adv.FloorBytes != 0 {
		t.Fatalf("advice %+v: want %s on go(paced), 2 types tried, no floor", adv, advise.TypesSchema)
	}
	for _, tr := range adv.Tried {
		var kinds []string
		for _, tg := range tr.Targets {
			kinds = append(kinds, tg.Move.Kind())
			if tg.Error == "" && (tg.Low > tg.High || len(tg.Lows) != 1) {
				t.Errorf("%s into %s: bounds %d to %d, lows %v", tr.Type, tg.Move.Kind(), tg.Low, tg.High, tg.Lows)
			}
		}
		slices.Sort(kinds)
		want := []string{"heap", "pool.NewOf"}
		if strings.HasPrefix(tr.Type, "[]") {
			want = []string{"heap", "pools"}
		}
		if !slices.Equal(kinds, want) {
			t.Errorf("%s measured into %v, want %v", tr.Type, kinds, want)
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
	// The text fits maxWidth, its table the headline columns and those
	// that fit; --wide prints every column.
	for _, wide := range []bool{false, true} {
		args := []string{"advise", "--repeats", "1", "--types", "2", "--min-type", "0", goTrace}
		heads := []string{"type", "into", "saving: freed late to early"}
		if wide {
			args = append(args, "--wide")
			heads = append(heads, "above 0 at", "at most", "at the trace's peak", "objects", "peak RSS")
		}
		stdout.Reset()
		if code := run(args, &stdout, &stderr); code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, stderr.String())
		}
		checkWidth(t, stdout.String(), wide, heads...)
	}
	// With the default floor, no type under it is tried.
	stdout.Reset()
	if code := run([]string{"advise", "--repeats", "1", "--format", "json", goTrace}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	adv.Tried = nil
	if err := json.Unmarshal(stdout.Bytes(), &adv); err != nil {
		t.Fatal(err)
	}
	for _, tr := range adv.Tried {
		if tr.Bytes < adv.FloorBytes || adv.FloorBytes < 1<<20 {
			t.Errorf("%s tried with %d bytes at the peak, the floor %d", tr.Type, tr.Bytes, adv.FloorBytes)
		}
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
