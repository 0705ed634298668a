package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/carvelab/carve/internal/invariants"
	"github.com/carvelab/carve/lab/record"
	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/rows"
	"github.com/carvelab/carve/lab/scenario"
)

func TestDemo(t *testing.T) {
	var out bytes.Buffer
	// As carve demo writes it: within the width.
	w := &fitWriter{w: &out}
	if err := errors.Join(scenario.Demo(w, scenario.DemoConfig{Connections: 2000, Persons: 10000}), w.flush()); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	wide(t, "carve demo", out.String())
	for _, want := range []string{
		"fifth is null: 1, distinct: 1",
		"freed chunk reused: 1",
		"pool(16, align 8): two chunks 16 bytes apart, 16 usable",
		"pool(40, align 16): two chunks 48 bytes apart, 40 usable; per chunk 8 B padding, no header",
		"pool: next buffers of 1024 B: RSS after setup",
		"pool: next buffers of 4096 B: RSS after setup",
		"int variable: 42",
		"user id: 101, name: ABCxyz",
		"bump allocator: 10000 Person",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"help", []string{"help"}, 0, "usage: carve [COMMAND]"},
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"demo with an argument", []string{"demo", "extra"}, 2, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, &stdout, &stderr); code != tt.code {
				t.Errorf("run(%q) = %d, want %d", tt.args, code, tt.code)
			}
			if got := stdout.String() + stderr.String(); !strings.Contains(got, tt.out) {
				t.Errorf("run(%q) printed %q, want it to contain %q", tt.args, got, tt.out)
			}
		})
	}
}

func TestLabCommands(t *testing.T) {
	dir := t.TempDir()
	gen := dir + "/conn.txt"
	conv := dir + "/conv.txt"
	bad := dir + "/bad.trace"
	dangling := dir + "/dangling.trace"
	if err := os.WriteFile(bad, []byte("# carve trace v1\na 1 100\na 2 lots\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dangling, []byte("# carve trace v1\na 1 100\nf 7\nf 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	steps := []struct {
		name string
		args []string
		code int
		out  string // a part of standard output, or of standard error when code != 0
	}{
		{"gen", []string{"gen", "connection", "next=4096", "n=500", "-o", gen}, 0, ""},
		{"gen unknown", []string{"gen", "nosuch"}, 2, `unknown generator "nosuch"`},
		{"gen bad parameter", []string{"gen", "connection", "bogus=1"}, 2, `no parameter "bogus"`},
		{"convert", []string{"convert", "-o", conv, gen}, 0, ""},
		{"convert missing file", []string{"convert", dir + "/nosuch"}, 2, "no such file"},
		{"stats", []string{"stats", conv}, 0, "peak live: 1.98 MiB in 1,000 objects"},
		{"replay", []string{"replay", "--alloc", "first-fit,buddy-header,sizeclass", gen}, 0, "buddy-header"},
		{"replay with a pool", []string{"replay", "--alloc", "first-fit", "--pool", "1024", gen}, 0, "first-fit+pool(1024)"},
		{"replay unknown allocator", []string{"replay", "--alloc", "nosuch", gen}, 2, "unknown allocator"},
		{"replay no trace", []string{"replay"}, 2, "want at least one TRACE"},
		{"replay as json", []string{"replay", "--alloc", "best-fit", "--format", "json", gen}, 0, `"schema": "carve.replay/v4"`},
		{"replay as markdown", []string{"replay", "--alloc", "best-fit", "--format", "markdown", gen}, 0, "| **best-fit** |"},
		{"replay as csv", []string{"replay", "--alloc", "best-fit", "--format", "csv", gen}, 0, ",best-fit,"},
		{"replay bad format", []string{"replay", "--format", "xml", gen}, 2, `--format "xml"`},
		{"replay flags after the trace", []string{"replay", gen, "--alloc", "buddy", "--stable"}, 0, "buddy"},
		{"replay two pools", []string{"replay", "--alloc", "best-fit", "--pool", "64", "--pool", "1024", gen}, 0, "best-fit+pool(64,1024)"},
		{"replay bad pool", []string{"replay", "--pool", "-3", gen}, 2, "want a positive size"},
		{"replay no checks", []string{"replay", "--alloc", "ao-first-fit", "--nocheck", gen}, 0, "ao-first-fit"},
		{"replay a shipped trace", []string{"replay", "--alloc", "sizeclass", "--jobs", "1", "aosp-systemui"}, 0, "aosp-systemui"},
		{"replay a generated trace", []string{"replay", "--alloc", "best-fit", "gen:carving:n=300"}, 0, "grew in second wave"},
		{"replay unknown generator", []string{"replay", "gen:nosuch"}, 2, `unknown generator "nosuch"`},
		{"replay bad generator parameter", []string{"replay", "gen:bump:n=-1"}, 2, "n = -1"},
		{"replay bad jobs", []string{"replay", "--jobs", "0", gen}, 2, "--jobs 0"},
		{"replay no such trace", []string{"replay", dir + "/nosuch"}, 2, "no such file, and not a shipped trace"},
		{"replay a malformed trace", []string{"replay", "--alloc", "first-fit", bad}, 2, "bad.trace:3:"},
		{"replay a strict trace error", []string{"replay", "--alloc", "first-fit", "--strict", dangling}, 1, "free of object 7"},
		{"replay a trace error, not strict", []string{"replay", "--alloc", "first-fit", dangling}, 0, "first-fit"},
	}
	for _, s := range steps {
		stdout.Reset()
		stderr.Reset()
		code := run(s.args, &stdout, &stderr)
		got := stdout.String()
		if s.code != 0 {
			got = stderr.String()
		}
		if code != s.code || !strings.Contains(got, s.out) {
			t.Fatalf("%s: run(%q) = %d, printed %q; want %d and %q", s.name, s.args, code, got, s.code, s.out)
		}
		if strings.Contains(strings.Join(s.args, " "), "json") && code == 0 {
			var doc struct {
				Schema string `json:"schema"`
				Rows   []struct {
					Allocator     string   `json:"allocator"`
					PeakLive      int64    `json:"peak_live"`
					PeakFootprint int64    `json:"peak_footprint"`
					Fragmentation *float64 `json:"fragmentation_percent_at_end"`
				} `json:"rows"`
			}
			if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
				t.Fatalf("%s: output is not JSON: %v", s.name, err)
			}
			if len(doc.Rows) != 1 || doc.Rows[0].PeakLive != 2080000 || doc.Rows[0].PeakFootprint < doc.Rows[0].PeakLive || doc.Rows[0].Fragmentation == nil {
				t.Errorf("%s: rows %+v, want one best-fit row with peak live 2080000 <= peak footprint and a fragmentation", s.name, doc.Rows)
			}
		}
	}
}

// TestLab runs the lab as carve does with no arguments, at a small n:
// a table for the shipped trace and one for each scenario, with the pool
// rows and the growth in the last phase.
func TestLab(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"lab", "--n", "400", "--stable"}, &stdout, &stderr); code != 0 {
		t.Fatalf("carve lab = %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"aosp-systemui\n",
		"gen:connection:n=400,next=4096\n", "grew in next buffers",
		"gen:carving:n=400,smalls=1\n", "grew in second wave",
		"first-fit+pool(1024)", "sizeclass+pool(1024)", "buddy-header",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lab output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "ns/op") {
		t.Errorf("--stable output has the ns/op column:\n%s", out)
	}
	for _, bad := range [][]string{{"lab", "extra"}, {"lab", "--n", "0"}, {"lab", "--pool", "64"}} {
		if code := run(bad, &stdout, &stderr); code != 2 {
			t.Errorf("run(%q) = %d, want 2", bad, code)
		}
	}
}

var update = flag.Bool("update", false, "rewrite the golden tables in testdata/golden")

// TestGoldenTables replays the small trace of each format (the trace
// package's golden inputs) through every row of replay's table whose
// figures do not vary with the machine, and compares the table, every
// column but those that vary from run to run, with testdata/golden.
func TestGoldenTables(t *testing.T) {
	if invariants.Enabled {
		// A checked build's heaps keep more bookkeeping (bitmaps of the
		// blocks in use), which their footprint counts: its tables differ.
		t.Skip("the golden tables are a release build's")
	}
	inputs, err := filepath.Glob("../../lab/trace/testdata/golden/*")
	if err != nil {
		t.Fatal(err)
	}
	labelled, err := filepath.Glob("../../lab/trace/testdata/labelled/*")
	inputs = append(inputs, labelled...)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, in := range inputs {
		if strings.HasSuffix(in, ".golden") {
			continue
		}
		n++
		t.Run(filepath.Base(in), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			// carve's heaps only: the real mallocs and the Go heap vary
			// with the machine.
			var stable []string
			for _, r := range replay.Rows() {
				if !r.Varies {
					stable = append(stable, r.Name)
				}
			}
			heaps := strings.Join(stable, ",")
			if code := run([]string{"replay", "--stable", "--wide", "--alloc", heaps, in}, &stdout, &stderr); code != 0 {
				t.Fatalf("carve replay %s = %d: %s", in, code, stderr.String())
			}
			golden := filepath.Join("testdata", "golden", filepath.Base(in)+".table")
			if *update {
				if err := os.WriteFile(golden, stdout.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -run GoldenTables -update writes it)", err)
			}
			if got := stdout.String(); got != string(want) {
				t.Errorf("carve replay --stable --wide %s:\n%s\nwant (%s):\n%s", in, got, golden, want)
			}
		})
	}
	if n < 7 {
		t.Errorf("%d golden inputs, want one per format (7)", n)
	}
}

// TestTableWidth checks that the text tables fit maxWidth characters,
// their notes and verdicts too, with the longest rows' names (an
// allocator behind a pool) and the columns of a scenario and of a Go
// program's trace, and that --wide has every column.
func TestTableWidth(t *testing.T) {
	args := []string{"replay", "--alloc", "ao-first-fit,buddy-header,heap,go", "--pool", "1024", "gen:connection:n=2000,next=4096", goTrace}
	var narrow, wide, stderr bytes.Buffer
	if code := run(args, &narrow, &stderr); code != 0 {
		t.Fatalf("carve %q = %d: %s", args, code, stderr.String())
	}
	for _, l := range strings.Split(narrow.String(), "\n") {
		if len(l) > maxWidth {
			t.Errorf("a line of %d characters, more than %d: %q", len(l), maxWidth, l)
		}
	}
	if code := run(append([]string{args[0], "--wide"}, args[1:]...), &wide, &stderr); code != 0 {
		t.Fatalf("carve %q --wide = %d: %s", args, code, stderr.String())
	}
	for _, c := range columns {
		head := strings.Replace(c.head, "PHASE", "", 1)
		if !strings.Contains(wide.String(), head) {
			t.Errorf("--wide: no column %q:\n%s", head, wide.String())
		}
		if c.wide && strings.Contains(narrow.String(), "  "+head+"  ") {
			t.Errorf("without --wide: the column %q:\n%s", head, narrow.String())
		}
	}
}

// TestProgress checks the progress line and that it stays off when
// standard error is not a terminal.
func TestProgress(t *testing.T) {
	var out bytes.Buffer
	q := startProgress(&out, 3)
	q.stop()
	if out.Len() != 0 {
		t.Errorf("progress of a run shorter than 10 s off a terminal printed %q", out.String())
	}
	p := &progress{}
	p.Total = 4
	p.Finished.Add(2)
	p.Events.Add(2500000)
	if got, want := p.line(3*time.Second), "carve: [##########..........] 2/4 replays, 2.5M events, 3s"; got != want {
		t.Errorf("line = %q, want %q", got, want)
	}
	var none *progress
	if none.counts() != nil {
		t.Error("a nil progress counts")
	}
	none.stop()
}

// TestReplayJSONPhases checks that a generated scenario's phases reach
// the JSON, with the footprint at the end of each.
func TestReplayJSONPhases(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"replay", "--alloc", "best-fit", "--format", "json", "gen:connection:n=1000,next=4096"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var doc struct {
		Rows []struct {
			Phases []struct {
				Name      string `json:"name"`
				EndEvent  int64  `json:"end_event"`
				Footprint int64  `json:"footprint"`
			} `json:"phases"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	ps := doc.Rows[0].Phases
	if len(ps) != 3 || ps[2].Name != "next buffers" || ps[2].EndEvent != 4000 {
		t.Fatalf("phases = %+v, want setup, scratch freed, next buffers ending at 4000", ps)
	}
	if grew := ps[2].Footprint - ps[1].Footprint; grew < 1000*4096 {
		t.Errorf("the next buffers grew the footprint by %d, want at least 1000 × 4096", grew)
	}
}

// asCarve, set in the environment of a test binary a test starts, makes it
// carve's command line (see TestMain).
const asCarve = "CARVE_TEST_AS_CARVE"

// TestMain lets the test binary serve as carve's child process, as the
// carve binary does: replays of the real mallocs and of the Go heap start
// os.Executable() again with the hidden child command.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == rows.ChildCommand || os.Getenv(asCarve) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// needReal reports a real malloc's row that is unavailable: a skip, but
// a failure when CI=true (CI installs every library).
func needReal(t *testing.T, name, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s unavailable on CI: %s", name, why)
	}
	t.Skipf("%s unavailable: %s", name, why)
}

// TestRealRows replays a small scenario through each real malloc and the
// Go heap, each in its own child, and checks the figures are plausible:
// the footprint at least the live memory, the resident bytes within the
// footprint plus the noise of the baseline, the scenario's growth seen.
func TestRealRows(t *testing.T) {
	const n = 3000
	for _, name := range append([]string{"go"}, rows.RealMallocs...) {
		t.Run(name, func(t *testing.T) {
			r := replayRows(t, "replay", "--alloc", name, "--format", "json", "gen:connection:n=3000,next=4096")[0]
			if r.ErrorKind == rows.KindUnavailable {
				needReal(t, name, r.Error)
			}
			if r.Error != "" || r.Measured != "child" {
				t.Fatalf("row %s: error %q, measured %q", name, r.Error, r.Measured)
			}
			noise := int64(4 << 20)
			if name == "go" && raceEnabled {
				noise = 8 * r.PeakFootprint // the race detector's shadow of the Go heap
			}
			if r.PeakFootprint < r.PeakLive || r.PeakResident < r.PeakLive/2 || r.PeakResident > r.PeakFootprint+noise {
				t.Errorf("%s: peak live %d, footprint %d, resident %d: want live <= footprint, resident within footprint + %d",
					name, r.PeakLive, r.PeakFootprint, r.PeakResident, noise)
			}
			grew := r.Phases[2].Resident - r.Phases[1].Resident
			if grew < n*4096*7/10 {
				t.Errorf("%s: RSS grew %d B for %d new 4 KiB buffers", name, grew, n)
			}
			t.Logf("%s: peak live %d, footprint %d, resident %d, grew %d, %.0f ns/op", name, r.PeakLive, r.PeakFootprint, r.PeakResident, grew, r.NsPerOp)
		})
	}
}

// TestScenarios runs the article's experiments as commands, on glibc (the
// article's malloc) and first fit, at a twentieth of their size where they
// grow the heap, and checks the article's lessons in their lines.
func TestScenarios(t *testing.T) {
	line := func(out, prefix string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		t.Fatalf("no line starting %q in:\n%s", prefix, out)
		return ""
	}
	runScenario := func(args ...string) string {
		var stdout, stderr bytes.Buffer
		if code := run(append([]string{"scenario"}, args...), &stdout, &stderr); code != 0 {
			t.Fatalf("carve scenario %q = %d: %s", args, code, stderr.String())
		}
		return stdout.String()
	}
	out := runScenario("stride", "--alloc", "glibc,first-fit,sizeclass,heap-mesh")
	if l := line(out, "glibc:"); !strings.Contains(l, "32 bytes apart, 24 usable") && !strings.Contains(l, "unavailable") {
		t.Errorf("stride on glibc: %q, want the article's 32 bytes apart, 24 usable", l)
	}
	if l := line(out, "first-fit:"); !strings.Contains(l, "32 bytes apart, 24 usable") {
		t.Errorf("stride on first fit: %q", l)
	}
	// heap-mesh hands a slab's slots out at random: two consecutive
	// blocks lie anywhere in it, their neighbours 16 bytes apart.
	if l := line(out, "heap-mesh:"); !strings.Contains(l, " 16 bytes apart, 16 usable") {
		t.Errorf("stride on heap-mesh: %q, want its slots' 16 bytes apart", l)
	}
	line(out, "pool: pool(16) twice: 16 bytes apart, 16 usable")
	out = runScenario("pool")
	line(out, "pool: fifth is null: 1, distinct: 1")
	line(out, "pool: freed chunk reused: 1")

	// grewKB reads the number before " KB" after marker in a line.
	grewKB := func(l, marker string) int64 {
		i := strings.LastIndex(l, marker)
		if i < 0 {
			t.Fatalf("no %q in %q", marker, l)
		}
		f := strings.Fields(l[i+len(marker):])
		v, err := strconv.ParseInt(strings.Trim(f[0], "(+"), 10, 64)
		if err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		return v
	}
	const n = 5000
	for _, alloc := range []string{"glibc", "first-fit"} {
		out = runScenario("connection", "--wide", "--n", strconv.Itoa(n), "--next", "4096", "--alloc", alloc)
		if l := line(out, alloc+":"); !strings.Contains(l, "unavailable") {
			if g := grewKB(l, "(grew "); g < n*4*9/10 {
				t.Errorf("%s, next 4096: %q, want growth of about %d KB", alloc, l, n*4)
			}
		}
		out = runScenario("connection", "--wide", "--n", strconv.Itoa(n), "--next", "1024", "--alloc", alloc)
		if l := line(out, alloc+":"); !strings.Contains(l, "unavailable") {
			if g := grewKB(l, "(grew "); g > n/10 {
				t.Errorf("%s, next 1024: %q, want no growth", alloc, l)
			}
		}
		out = runScenario("carving", "--wide", "--n", strconv.Itoa(n), "--smalls", "1", "--alloc", alloc)
		if l := line(out, alloc+":"); !strings.Contains(l, "unavailable") {
			if g := grewKB(l, "2nd wave of 1 KB "); g < 0 {
				t.Errorf("%s: %q", alloc, l)
			}
			if w := grewKB(l, "KB ("); w < n*150/1024 {
				t.Errorf("%s, carving malloc 1: %q, want the second wave to grow by about n × 208 B", alloc, l)
			}
		}
		out = runScenario("carving", "--wide", "--n", strconv.Itoa(n), "--smalls", "1", "--from", "pool", "--alloc", alloc)
		if l := line(out, alloc+"+pool(1024):"); !strings.Contains(l, "unavailable") {
			// Without the pool the wave grows by about n × 208 B (1 MiB
			// here). A real malloc's row replays in a Go child whose own
			// bookkeeping (about 50 B per object born in the wave) lands in
			// its RSS: up to a few hundred KiB at this size.
			if w := grewKB(l, "KB ("); w > 512 {
				t.Errorf("%s, carving pool 1: %q, want no growth in the second wave", alloc, l)
			}
		}
	}
	// Without --wide, every line fits the width, one line per allocator
	// in the article's order of figures.
	// The longest names are the pooled rows'.
	for _, args := range [][]string{{"connection", "--next", "4096"}, {"carving", "--smalls", "1"}, {"carving", "--smalls", "1", "--from", "pool"}} {
		out := runScenario(append(args, "--n", strconv.Itoa(n), "--alloc", "buddy-header,ao-first-fit,glibc")...)
		for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			if len(l) > maxWidth {
				t.Errorf("carve scenario %s: a line of %d characters, more than %d: %q", args[0], len(l), maxWidth, l)
			}
		}
		for _, a := range []string{"buddy-header", "glibc"} {
			if slices.Contains(args, "pool") {
				a += "+pool(1024)"
			}
			if l := line(out, a+":"); !strings.Contains(l, "after freeing scratch") {
				t.Errorf("carve scenario %s: %q, want the article's figures", args[0], l)
			}
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"scenario", "nosuch"}, &stdout, &stderr); code != 2 {
		t.Errorf("unknown scenario: exit %d", code)
	}
}

// TestRecordReplay records a small real program (python3 building and
// dropping a dict, its allocations sent to malloc) with carve's recorder
// and replays the trace through every allocator.
func TestRecordReplay(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		needReal(t, "python3", err.Error())
	}
	if err := record.Available(record.Default); err != nil {
		needReal(t, "the carve recorder", err.Error())
	}
	t.Setenv("PYTHONMALLOC", "malloc")
	dir := t.TempDir()
	tr := filepath.Join(dir, "py.trace")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"record", "-o", tr, "--", "python3", "-c", "d = {i: str(i) for i in range(3000)}; del d"}, &stdout, &stderr); code != 0 {
		t.Fatalf("carve record = %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "events from") {
		t.Errorf("carve record said %q", stderr.String())
	}
	got := replayRows(t, "replay", "--format", "json", tr)
	if len(got) != len(rows.Names()) {
		t.Fatalf("%d rows, want one per allocator (%d)", len(got), len(rows.Names()))
	}
	for _, r := range got {
		switch {
		case r.ErrorKind == rows.KindUnavailable:
			needReal(t, r.Allocator, r.Error)
		case r.Error != "":
			t.Errorf("%s: %s", r.Allocator, r.Error)
		case r.Events < 1000 || r.PeakLive == 0 || r.PeakFootprint < r.PeakLive || r.TraceErrors > r.Events/100:
			t.Errorf("%s: %d events, peak live %d, peak footprint %d, %d trace errors", r.Allocator, r.Events, r.PeakLive, r.PeakFootprint, r.TraceErrors)
		}
	}

	// A program that calls no malloc gets no trace, and says so.
	none := filepath.Join(dir, "none.trace")
	stderr.Reset()
	if code := run([]string{"record", "-o", none, "--", "/bin/true"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "no trace written") {
		t.Errorf("record of /bin/true = %d, %q; want 2 and no trace written", code, stderr.String())
	}
	if _, err := os.Stat(none); err == nil {
		t.Error("record of /bin/true wrote a file")
	}
	if code := run([]string{"record", "--recorder", "nosuch", "--", "true"}, &stdout, &stderr); code != 2 {
		t.Errorf("unknown recorder: exit %d", code)
	}
}

// TestRecordGoTest records a Go program's own heap from its tests (the
// connection workload of lab/record/testdata/goconn), replays it through
// every row and lists its types; a pure-Go binary run directly is refused
// with the way to record it.
func TestRecordGoTest(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		needReal(t, "go", err.Error())
	}
	dir := t.TempDir()
	tr := filepath.Join(dir, "goconn.trace")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"record", "-o", tr, "--", goTool, "test", "-run", "TestConnections", "../../lab/record/testdata/goconn"}, &stdout, &stderr); code != 0 {
		t.Fatalf("carve record -- go test = %d: %s", code, stderr.String())
	}
	stdout.Reset()
	if code := run([]string{"stats", tr}, &stdout, &stderr); code != 0 {
		t.Fatalf("carve stats = %d: %s", code, stderr.String())
	}
	for _, want := range []string{"types (labels) by bytes live at the peak", "goconn.session", "goconn.conn"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("carve stats of the Go trace lacks %q:\n%s", want, stdout.String())
		}
	}
	for _, r := range replayRows(t, "replay", "--format", "json", tr) {
		switch {
		case r.ErrorKind == rows.KindUnavailable:
			needReal(t, r.Allocator, r.Error)
		case r.Error != "" || r.TraceErrors != 0 || r.PeakLive < 10<<20:
			t.Errorf("%s: error %q, %d trace errors, peak live %d", r.Allocator, r.Error, r.TraceErrors, r.PeakLive)
		}
	}

	// A pure-Go binary, run as it is: refused, with the way to record it.
	bin := filepath.Join(dir, "goprog")
	if out, err := exec.Command(goTool, "build", "-o", bin, "../../lab/trace/testdata/goprog").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	stderr.Reset()
	if code := run([]string{"record", "-o", filepath.Join(dir, "p.trace"), "--", bin}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "go test") {
		t.Errorf("carve record of a pure-Go binary = %d, %q; want 2 and how to record it", code, stderr.String())
	}
}

// replayRows runs carve with args (a replay in JSON) and returns its
// rows; a non-zero exit fails the test.
func replayRows(t *testing.T, args ...string) []rows.Row {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("carve %v = %d: %s", args, code, stderr.String())
	}
	var doc struct {
		Rows []rows.Row `json:"rows"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Rows
}
