package rows

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/carvelab/carve/lab/record"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/trace/summary"
	"github.com/carvelab/carve/lab/traces"
)

// recordGo records a go test command with the go recorder into a file
// of the test's own, with env added, and returns the file and what the
// program printed. Without the go command the test is skipped, or fails
// under CI=true.
func recordGo(t *testing.T, cmd []string, env ...string) (path string, output []byte) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the go command is missing under CI=true: %v", err)
		}
		t.Skipf("the go command is missing: %v", err)
	}
	var out, programOut bytes.Buffer
	res, err := record.Record(context.Background(), cmd, &out, record.Options{Recorder: "go", Stdout: &programOut, Stderr: &programOut, Env: env})
	if err != nil {
		t.Fatalf("record %q = %v; the program said:\n%s", cmd, err, programOut.Bytes())
	}
	t.Logf("recorded %d events of %q", res.Events, cmd)
	path = filepath.Join(t.TempDir(), "recorded.trace")
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, programOut.Bytes()
}

// summarize summarizes the trace at path, its frees at the marks' ends
// unless sweep.
func summarize(t *testing.T, path string, sweep bool) (summary.Trace, traces.Trace) {
	t.Helper()
	tr, err := traces.Resolve(path)
	if err != nil {
		t.Fatal(err)
	}
	if sweep {
		tr = tr.FreesAtSweep()
	}
	tr = tr.Spooled()
	src, closer, err := tr.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	s, err := summary.OfSource(src)
	if err != nil {
		t.Fatal(err)
	}
	return s, tr
}

// gctraceLine is a collection as GODEBUG=gctrace=1 prints it: its
// number and its heap before, at the end of its mark, and marked, in
// MiB (the runtime's "MB" are bytes >> 20).
var gctraceLine = regexp.MustCompile(`(?m)^gc (\d+) @.* (\d+)->(\d+)->(\d+) MB`)

// TestRecordedCycles records a Go program whose live data is flat while
// it allocates garbage (testdata/goflat), with GODEBUG=gctrace=1, and
// checks carve's marked heap against the runtime's: every collection the
// trace holds is one gctrace printed, its marked bytes gctrace's third
// figure; the marked heap carve counts from the trace's objects, with
// their frees moved to the marks' ends, is that figure to the MiB; after
// the program's closing runtime.GC() it is the runtime's own figure
// within 1%; it stays flat; and peak live, counted with the frees moved,
// is near the marked heap where counted at the sweep it holds a cycle of
// garbage.
func TestRecordedCycles(t *testing.T) {
	path, output := recordGo(t, []string{"go", "test", "-v", "-count=1", "-run", "^TestFlat$", "./testdata/goflat"}, "GODEBUG=gctrace=1")
	// The go command, the compiler and the linker print their own
	// collections: the test binary's follow its "=== RUN" (-v).
	_, out, ok := bytes.Cut(output, []byte("=== RUN   TestFlat"))
	if !ok {
		t.Fatalf("the test binary did not run TestFlat")
	}
	// gctrace's lines, each process's numbered 1, 2, 3...: the go
	// command's own may come between the test binary's, which are the
	// longest run of consecutive numbers.
	var runs [][][3]uint64 // before, at the mark's end, marked: MiB
	var ends []uint64      // by run: the number of its last line
	for _, m := range gctraceLine.FindAllSubmatch(out, -1) {
		n, _ := strconv.ParseUint(string(m[1]), 10, 64)
		var v [3]uint64
		for i := range v {
			v[i], _ = strconv.ParseUint(string(m[i+2]), 10, 64)
		}
		r := slices.Index(ends, n-1)
		if r < 0 {
			runs, ends, r = append(runs, nil), append(ends, 0), len(runs)
		}
		runs[r], ends[r] = append(runs[r], v), n
	}
	var gc [][3]uint64
	for _, r := range runs {
		if len(r) > len(gc) {
			gc = r
		}
	}
	s, tr := summarize(t, path, false)
	if tr.Frees() != traces.FreesMoved {
		t.Fatalf("the recorded trace's frees: %v, want them moved", tr.Frees())
	}
	cs := s.Cycles
	t.Logf("%d collections in gctrace's output, %d in the trace", len(gc), len(cs))
	if len(cs) < 5 || len(cs) > len(gc) {
		t.Fatalf("%d collections in the trace, %d in gctrace's output: want at least 5, and no more than gctrace's", len(cs), len(gc))
	}
	// The trace starts after the program's first collections, if any,
	// and the program may collect once more after it stops (or the go
	// command print one of its own): the trace's cycles are the run of
	// gctrace's lines whose marked heaps are the runtime's figures in the
	// trace, the first such run with the most equal.
	best, at := -1, 0
	for o := 0; o+len(cs) <= len(gc); o++ {
		same := 0
		for i, c := range cs {
			if c.Marked>>20 == gc[o+i][2] {
				same++
			}
		}
		if same > best {
			best, at = same, o
		}
	}
	gc = gc[at : at+len(cs)]
	for i, c := range cs {
		marked := gc[i][2]
		t.Logf("collection %d: carve's marked heap %.2f MiB, the runtime's %.2f MiB, gctrace's %d MB", i+1, mib(c.Live), mib(c.Marked), marked)
		if c.Marked>>20 != marked {
			t.Errorf("collection %d: the trace's marked bytes %d (%d MiB), gctrace's %d MB", i+1, c.Marked, c.Marked>>20, marked)
		}
		if d := int64(c.Live>>20) - int64(marked); d < -1 || d > 1 {
			t.Errorf("collection %d: carve's marked heap %.2f MiB, gctrace's %d MB: not to the MiB", i+1, mib(c.Live), marked)
		}
	}
	last := cs[len(cs)-1]
	if r := float64(last.Live) / float64(last.Marked); r < 0.99 || r > 1.01 {
		t.Errorf("after the closing collection: carve's marked heap %d B, the runtime's %d B (ratio %.4f): not within 1%%", last.Live, last.Marked, r)
	}
	// Flat: once the program holds its 32 MiB, a mark finds them and
	// what was allocated while it ran (the runtime allocates black),
	// which a loaded machine makes more of.
	// Flat means: besides that, what the closing collection found (the
	// 32 MiB, their slice, the runtime's own), to the MiB.
	during := allocatedInMarks(t, tr, cs)
	final := mib(cs[len(cs)-1].Live)
	built := false
	for i, c := range cs {
		// Built: the first mark that found the whole population.
		kept := mib(c.Live - during[i])
		built = built || kept >= final-1
		if built && (kept < final-1 || kept > final+1) {
			t.Errorf("collection %d: marked heap %.2f MiB, %.2f MiB of it allocated during the mark: want the %.2f MiB the closing collection found besides", i+1, mib(c.Live), mib(during[i]), final)
		}
	}
	// With the frees at the sweep, live at a mark's end still holds the
	// garbage the mark found: it is the heap gctrace's second figure
	// counts, not its third.
	atSweep := liveAtMarkEnds(t, path)
	if len(atSweep) != len(cs) {
		t.Fatalf("%d marks' ends in the trace read as it is, %d with the frees moved", len(atSweep), len(cs))
	}
	for i, live := range atSweep {
		t.Logf("collection %d: live %.2f MiB with the frees at the sweep, gctrace's heap at the mark's end %d MB", i+1, mib(live), gc[i][1])
		if d := mib(live) - float64(gc[i][1]); d < -3-0.1*float64(gc[i][1]) || d > 3+0.1*float64(gc[i][1]) {
			t.Errorf("collection %d: live %.2f MiB with the frees at the sweep, gctrace's heap at the mark's end %d MB: more than 10%% and 3 MiB apart", i+1, mib(live), gc[i][1])
		}
		// In the steady state (the population built a cycle ago; the
		// closing runtime.GC() found everything swept) the garbage a mark
		// finds, live at its end less what it marked, is of the order of
		// the population: GOGC=100 lets the heap double before the next.
		// Half of it is the bound: what was allocated during the mark, which a
		// loaded machine makes more of, is marked, not garbage.
		steady := i >= 1 && mib(cs[i-1].Live) >= 31 && i < len(cs)-1
		if garbage := mib(live) - mib(cs[i].Live); steady && garbage < final/2 {
			t.Errorf("collection %d: live %.2f MiB with the frees at the sweep, the marked heap %.2f MiB: garbage %.2f MiB, less than half the population %.2f MiB: the garbage of a cycle is missing", i+1, mib(live), mib(cs[i].Live), garbage, final)
		}
	}
	t.Logf("peak live (allocated, not yet known dead) %.2f MiB; peak marked heap %.2f MiB", mib(s.PeakLive), mib(s.PeakMarked))
	if s.PeakLive < s.PeakMarked {
		t.Errorf("peak live %d B is below the peak marked heap %d B", s.PeakLive, s.PeakMarked)
	}
}

// allocatedInMarks returns the bytes allocated during each mark of cs,
// in tr's events with the frees moved.
func allocatedInMarks(t *testing.T, tr traces.Trace, cs []summary.MarkedCycle) []uint64 {
	t.Helper()
	src, closer, err := tr.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	during := make([]uint64, len(cs))
	var p int64
	buf := make([]trace.Event, 4096)
	for {
		n, err := src.Read(buf)
		for _, e := range buf[:n] {
			if e.Op != trace.Free {
				for i, c := range cs {
					if c.Start <= p && p < c.End {
						during[i] += e.Size
					}
				}
			}
			p++
		}
		if err != nil {
			return during
		}
	}
}

// liveAtMarkEnds reads the trace at path as it is, its frees at the
// sweep, and returns the live bytes at each end of a mark.
func liveAtMarkEnds(t *testing.T, path string) []uint64 {
	t.Helper()
	read := func(each func(p int64, e trace.Event)) []trace.GoCycle {
		r, err := trace.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var p int64
		buf := make([]trace.Event, 4096)
		for {
			n, err := r.Read(buf)
			for _, e := range buf[:n] {
				each(p, e)
				p++
			}
			if err != nil {
				return r.GoCycles()
			}
		}
	}
	cycles := read(func(int64, trace.Event) {})
	sizes := map[uint64]uint64{}
	var live uint64
	at := make([]uint64, 0, len(cycles))
	// note books the live bytes at the ends at or before position p.
	note := func(p int64) {
		for len(at) < len(cycles) && cycles[len(at)].End <= p {
			at = append(at, live)
		}
	}
	var end int64
	read(func(p int64, e trace.Event) {
		note(p)
		switch e.Op {
		case trace.Free:
			live -= sizes[e.ID]
			delete(sizes, e.ID)
		case trace.Realloc:
			live += e.Size - sizes[e.ID]
			sizes[e.ID] = e.Size
		default:
			live += e.Size
			sizes[e.ID] = e.Size
		}
		end = p + 1
	})
	note(end)
	return at
}

func mib[T int64 | uint64](n T) float64 { return float64(n) / (1 << 20) }

// TestGoRowObjects records the connection workload
// (lab/record/testdata/goconn) and replays it through the go row, which
// collects where the program did: its heap's objects
// (/memory/classes/heap/objects:bytes, read in its child) peak within 10%
// of where the program's own did, as the trace's samples of that metric
// report them.
func TestGoRowObjects(t *testing.T) {
	path, _ := recordGo(t, []string{"go", "test", "-count=1", "-run", "^TestConnections$", "../record/testdata/goconn"})
	tr, err := traces.Resolve(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := summary.Of(r); err != nil {
		t.Fatal(err)
	}
	var program uint64
	for _, h := range r.GoHeap() {
		program = max(program, h.Objects)
	}
	r.Close()
	rw := Replay(tr, Spec{Alloc: "go"}, Options{}, nil)
	if rw.Error != "" {
		t.Fatal(rw.Error)
	}
	ratio := float64(rw.PeakUsed) / float64(program)
	t.Logf("the go row's objects peak at %.2f MiB, the program's at %.2f MiB (ratio %.3f); %d collections, by %q; frees at the %s",
		mib(rw.PeakUsed), mib(program), ratio, len(rw.Cycles), rw.Collected, rw.Frees)
	if rw.Collected != "program" || rw.Frees != traces.FreesAtMarkName || len(rw.Cycles) == 0 {
		t.Errorf("the go row collected by %q with %d collections, its frees at the %q: want the program's collections, the frees at the marks", rw.Collected, len(rw.Cycles), rw.Frees)
	}
	if ratio < 0.9 || ratio > 1.1 {
		t.Errorf("the go row's objects peak at %d B, the program's at %d B: not within 10%%", rw.PeakUsed, program)
	}
	// The paced model, the baseline of every what-if, against the
	// program's collections: its error, logged (one replay each is too
	// noisy to bound it here; carve advise prints it, the median of five).
	paced := Replay(tr, Spec{Alloc: "go", Paced: true}, Options{Touch: true}, nil)
	collected := Replay(tr, Spec{Alloc: "go"}, Options{Touch: true}, nil)
	if paced.Error != "" || collected.Error != "" {
		t.Fatal(paced.Error, collected.Error)
	}
	modelError := float64(paced.PeakRSS)/float64(collected.PeakRSS) - 1
	t.Logf("the paced go row's peak RSS %.2f MiB (peak live %.2f MiB), collected where the program did %.2f MiB: the model's error %+.1f%%", mib(paced.PeakRSS), mib(paced.PeakLive), mib(collected.PeakRSS), 100*modelError)
}
