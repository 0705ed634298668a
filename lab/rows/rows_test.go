package rows

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cheap "github.com/carvelab/carve/heap"
	"github.com/carvelab/carve/internal/size"
	"github.com/carvelab/carve/lab/internal/look"
	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/trace/gen"
	"github.com/carvelab/carve/lab/traces"
)

// TestMain lets the test binary serve as a row's child, as the carve
// command does.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ChildCommand {
		if err := ServeChild(os.Stdin, os.Stdout); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		list string
		want string // the names joined, or the start of the error
	}{
		{"all", strings.Join(Names(), ",")},
		{"best-fit,glibc", "best-fit,glibc"},
		{"firstfit", `unknown allocator "firstfit": want all or a comma-separated list of first-fit,`},
		{"pool", `unknown allocator: "pool" is not a row: a pool serves one size`},
		{"arena", `unknown allocator: "arena" is not a row`},
		{"", `unknown allocator ""`},
	} {
		names, err := Parse(tc.list)
		got := strings.Join(names, ",")
		if err != nil {
			got = err.Error()
			if !errors.Is(err, ErrUnknown) {
				t.Errorf("Parse(%q) = %v, want an error wrapping ErrUnknown", tc.list, err)
			}
		}
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("Parse(%q) = %q, want %q...", tc.list, got, tc.want)
		}
	}
}

func TestSpecLabel(t *testing.T) {
	if got := (Spec{Alloc: "first-fit", Routes: replay.SizePools(64, 1024)}).Label(); got != "first-fit+pool(64,1024)" {
		t.Errorf("Label = %q", got)
	}
	if _, err := (Spec{Alloc: "glibc"}).NewAllocator(false, trace.CycleHeap{}); err == nil {
		t.Error("NewAllocator(glibc) built a real malloc in this process")
	}
	for _, tc := range []struct {
		s    Spec
		want string
	}{
		{Spec{Alloc: "go"}, "go"},
		{Spec{Alloc: "go", GOGC: 50}, "go(gogc=50)"},
		{Spec{Alloc: "go", Paced: true}, "go(paced)"},
		{Spec{Alloc: "go", GOGC: 200, Paced: true, Routes: []replay.Route{{Label: "T"}}}, "go(gogc=200,paced)+pool(type=T)"},
		{Spec{Alloc: "go", Early: true, Routes: []replay.Route{{Label: "T", Into: replay.IntoHeap}}}, "go+heap(type=T,early)"},
	} {
		if got := tc.s.Label(); got != tc.want {
			t.Errorf("%+v: Label = %q, want %q", tc.s, got, tc.want)
		}
	}
}

// TestGoRowCollections: the go row on a trace with the program's
// collections collects where the program did, a what-if or a paced row
// as the program's ratio paces it, another GOGC by that GOGC; without
// collections, by GOGC.
func TestGoRowCollections(t *testing.T) {
	route := []replay.Route{{Label: "T"}}
	for _, tc := range []struct {
		s      Spec
		cycles bool
		want   string // the replay constructor's heap
	}{
		{Spec{Alloc: "go"}, true, "program"},
		{Spec{Alloc: "go", Paced: true}, true, "paced"},
		{Spec{Alloc: "go", Routes: route}, true, "paced"},
		{Spec{Alloc: "go", Routes: replay.SizePools(64)}, true, "paced"},
		{Spec{Alloc: "go", GOGC: 50}, true, "gogc"},
		{Spec{Alloc: "go", GOGC: 98, Paced: true}, true, "paced"},
		{Spec{Alloc: "go", GOGC: 98, Routes: route, Early: true}, true, "paced"},
		{Spec{Alloc: "go"}, false, "gogc"},
		{Spec{Alloc: "go", Paced: true, Routes: route}, false, "gogc"},
	} {
		a, err := tc.s.NewAllocator(tc.cycles, trace.CycleHeap{})
		if err != nil {
			t.Fatal(err)
		}
		got := replay.CollectedBy(a)
		a.Close()
		if got != tc.want {
			t.Errorf("%s, cycles %v: collects by %q, want %q", tc.s.Label(), tc.cycles, got, tc.want)
		}
	}
}

// TestReplayBothWays replays one trace through one carve heap in this
// process and in a child (Options.Isolate): the exact figures agree, and
// the child's job and row cross as JSON.
func TestReplayBothWays(t *testing.T) {
	tr, err := traces.Resolve("gen:carving:n=500")
	if err != nil {
		t.Fatal(err)
	}
	s := Spec{Alloc: "best-fit", Routes: replay.SizePools(64)}
	here := Replay(tr, s, Options{Touch: true}, nil)
	there := Replay(tr, s, Options{Touch: true, Isolate: true}, nil)
	if here.Error != "" || there.Error != "" {
		t.Fatalf("errors: %q, %q", here.Error, there.Error)
	}
	if here.Measured != "in process" || there.Measured != "child" {
		t.Errorf("measured %q and %q", here.Measured, there.Measured)
	}
	if here.Events != there.Events || here.PeakLive != there.PeakLive || here.PeakFootprint != there.PeakFootprint || len(here.Phases) != len(there.Phases) {
		t.Errorf("in process %+v\nin a child %+v", here, there)
	}
	bad := Replay(traces.Trace{Label: "/no/such/file"}, Spec{Alloc: "go"}, Options{}, nil)
	if bad.ErrorKind != KindInput || !errors.Is(bad.Err(), replay.ErrSource) {
		t.Errorf("a missing trace in a child: %+v", bad)
	}
}

// TestMeshCounted: a heap-mesh row counts what meshing did, in process
// and in a child alike, and its table's notes say so and how its resident
// memory was measured; the heap row has no such count.
func TestMeshCounted(t *testing.T) {
	if !canMeshHere(t) {
		return
	}
	tr, err := traces.Resolve("gen:randfree:n=20000,min=16,max=256")
	if err != nil {
		t.Fatal(err)
	}
	for _, isolate := range []bool{false, true} {
		mesh := Replay(tr, Spec{Alloc: "heap-mesh"}, Options{Touch: true, Isolate: isolate}, nil)
		plain := Replay(tr, Spec{Alloc: "heap"}, Options{Touch: true, Isolate: isolate}, nil)
		if mesh.Error != "" || plain.Error != "" {
			t.Fatalf("isolate %t: errors %q, %q", isolate, mesh.Error, plain.Error)
		}
		if m := mesh.Mesh; m == nil || m.Meshes == 0 || m.Meshed == 0 || m.Meshed > mesh.PeakFootprint {
			t.Errorf("isolate %t: heap-mesh's mesh counts %+v, want meshes and meshed bytes", isolate, m)
		}
		if plain.Mesh != nil {
			t.Errorf("isolate %t: the heap row counts meshes %+v", isolate, plain.Mesh)
		}
		want := "memory file's blocks"
		if isolate {
			want = "PSS"
		}
		notes := strings.Join(Table{Trace: tr, Rows: []Row{plain, mesh}}.Notes(), "\n")
		if !strings.Contains(notes, "heap-mesh: ") || !strings.Contains(notes, want) || strings.Contains(notes, "heap: ") {
			t.Errorf("isolate %t: notes %q, want heap-mesh's meshes and %q", isolate, notes, want)
		}
	}
}

// canMeshHere reports whether heaps mesh in this build and on this
// platform; with CI=true a heap that cannot is a failure.
func canMeshHere(t *testing.T) bool {
	h, err := cheap.New(cheap.Mesh())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if h.Meshing() {
		return true
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("heaps do not mesh in this build, and CI=true: CI runs on Linux")
	}
	t.Skip("heaps do not mesh in this build")
	return false
}

// resolveAll resolves TRACE arguments.
func resolveAll(t *testing.T, args ...string) []traces.Trace {
	t.Helper()
	var ts []traces.Trace
	for _, arg := range args {
		tr, err := traces.Resolve(arg)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, tr)
	}
	return ts
}

// everyRow is a spec for each of the lab's rows.
func everyRow() []Spec {
	var specs []Spec
	for _, n := range Names() {
		specs = append(specs, Spec{Alloc: n})
	}
	return specs
}

// TestSeriesKeepPeaks: for every row, the highest point of its series
// (what the report's charts draw) is the table's peak: footprint and
// resident memory alike.
func TestSeriesKeepPeaks(t *testing.T) {
	ts := resolveAll(t, "gen:connection:n=2000,next=4096", "gen:zipf:n=20000,seed=3")
	specs := everyRow()
	for _, tb := range Run(ts, specs, Options{Touch: true, Series: 50}, 2, nil) {
		for _, r := range tb.Rows {
			if r.ErrorKind == KindUnavailable {
				if os.Getenv("CI") == "true" {
					t.Errorf("%s unavailable on CI: %s", r.Allocator, r.Error)
				}
				continue
			}
			if r.Error != "" {
				t.Errorf("%s on %s: %s", r.Allocator, r.Trace, r.Error)
				continue
			}
			var fp, res, live int64
			for _, p := range r.Series {
				fp, res, live = max(fp, p.Footprint), max(res, p.Resident), max(live, p.Live)
			}
			if fp != r.PeakFootprint || res != r.PeakRSS || live != r.PeakLive || len(r.Series) == 0 {
				t.Errorf("%s on %s: the series' peaks are footprint %d, resident %d, live %d over %d points; the table's %d, %d, %d",
					r.Allocator, r.Trace, fp, res, live, len(r.Series), r.PeakFootprint, r.PeakRSS, r.PeakLive)
			}
		}
	}
}

// TestChildStoppedAboveMaxRSS: a row's child that takes more resident
// memory than Options.MaxRSS is stopped, and the row says why.
func TestChildStoppedAboveMaxRSS(t *testing.T) {
	tr, err := traces.Resolve("gen:connection:n=40000,next=4096")
	if err != nil {
		t.Fatal(err)
	}
	r := Replay(tr, Spec{Alloc: "go"}, Options{Touch: true, MaxRSS: 16 << 20}, nil)
	if r.Error == "" || !strings.Contains(r.Error, "--max-rss") || !strings.Contains(r.Error, "16.00 MiB") {
		t.Errorf("a child over its limit: error %q, want it stopped and the limit named", r.Error)
	}
}

// TestHeadlineIsSound: on the shipped trace and a trace of every
// generator, with every byte written, no row reads peak RSS below peak
// live; and every row's footprint starts near 0, a real malloc's
// start-up left out: replaying the first event of each trace, under
// 1 MiB. (Over more events a heap's own costs come in: sizeclass's first
// slab of each class is 64 KiB, a megabyte over the first 50 events of a
// trace of many sizes.)
func TestHeadlineIsSound(t *testing.T) {
	if testing.Short() {
		t.Skip("replays the shipped trace through every row")
	}
	args := []string{
		"aosp-systemui",
		"gen:connection:n=10000,next=4096",
		"gen:carving:n=10000,smalls=1",
		"gen:bump:n=100000",
		"gen:phases:n=10000",
		"gen:zipf:n=20000",
		"gen:randfree:n=20000,min=16,max=256",
		"gen:randfree:n=500",
	}
	if raceEnabled {
		// The detector makes every replay ten times slower; the lab's own
		// traces are enough to exercise its code.
		args = args[:3]
	}
	if got, want := len(gen.All()), 6; got != want {
		t.Errorf("%d generators, the test knows %d: give the new one a trace here", got, want)
	}
	ts := resolveAll(t, args...)
	specs := everyRow()
	for _, tb := range Run(ts, specs, Options{Touch: true, Series: 2000}, 2, nil) {
		for _, r := range tb.Rows {
			if r.ErrorKind == KindUnavailable && os.Getenv("CI") != "true" {
				continue
			}
			switch {
			case r.Error != "":
				t.Errorf("%s on %s: %s", r.Allocator, r.Trace, r.Error)
			case r.RSSRatio < 1:
				t.Errorf("%s on %s: peak RSS %d below peak live %d", r.Allocator, r.Trace, r.PeakRSS, r.PeakLive)
			}
		}
	}
	// The first event of each trace, as a file.
	var heads []traces.Trace
	for i, tr := range ts {
		src, closer, err := tr.Open()
		if err != nil {
			t.Fatal(err)
		}
		evs := make([]trace.Event, 1)
		n, _ := src.Read(evs)
		closer.Close()
		var b bytes.Buffer
		w := trace.NewWriter(&b)
		for _, e := range evs[:n] {
			w.Write(e)
		}
		w.Flush()
		path := filepath.Join(t.TempDir(), fmt.Sprintf("head%d.trace", i))
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		h, err := traces.Resolve(path)
		if err != nil {
			t.Fatal(err)
		}
		heads = append(heads, h)
	}
	for _, tb := range Run(heads, specs, Options{Touch: true}, 2, nil) {
		for _, r := range tb.Rows {
			if r.Error == "" && r.PeakFootprint >= 1<<20 {
				t.Errorf("%s: a footprint of %s after the first event of a trace (%s live): want the allocator's start-up left out", r.Allocator, size.Format(r.PeakFootprint), size.Format(r.PeakLive))
			}
		}
	}
}

// TestAllocatorTable: every allocator of the tables has a name of its
// own, a line of doc and a look no other has, of the palette's colours and
// patterns, never the dots a pooled row takes; New builds every row of
// replay's table, and Parse takes every name.
func TestAllocatorTable(t *testing.T) {
	names := map[string]bool{}
	looks := map[look.Look]string{}
	for _, a := range Allocators() {
		if names[a.Name] {
			t.Errorf("%s: listed twice", a.Name)
		}
		names[a.Name] = true
		if a.Doc == "" || strings.Contains(a.Doc, "\n") {
			t.Errorf("%s: doc %q, want one line", a.Name, a.Doc)
		}
		if other, ok := looks[a.Look]; ok {
			t.Errorf("%s and %s are both drawn %v", other, a.Name, a.Look)
		}
		looks[a.Look] = a.Name
		if !slices.Contains(look.Colours, a.Look.Color) || !slices.Contains(look.Dashes, a.Look.Dash) || a.Look.Dash == look.Dotted {
			t.Errorf("%s: look %v, want a colour of look.Colours and a pattern of look.Dashes but the pooled rows' dots", a.Name, a.Look)
		}
		if l, ok := LookOf(a.Name); !ok || l != a.Look {
			t.Errorf("LookOf(%s) = %v, %v; want %v", a.Name, l, ok, a.Look)
		}
		if a.Real != IsReal(a.Name) {
			t.Errorf("%s: Real %v, IsReal %v", a.Name, a.Real, IsReal(a.Name))
		}
	}
	if got := Names(); len(got) != len(names) {
		t.Errorf("Names() = %v, want the %d allocators", got, len(names))
	}
	if got, err := Parse(strings.Join(Names(), ",")); err != nil || !slices.Equal(got, Names()) {
		t.Errorf("Parse(every name) = %v, %v", got, err)
	}
	for _, r := range replay.Rows() {
		a, err := replay.New(r.Name)
		if err != nil {
			t.Errorf("replay.New(%s): %v", r.Name, err)
			continue
		}
		if err := a.Close(); err != nil {
			t.Errorf("%s: Close: %v", r.Name, err)
		}
	}
}
