package rows

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carvelab/carve/lab/traces"
)

// programTrace writes a native v3 trace of a Go program that holds 32
// objects of 1 MiB, drops half, and collects twice, with samples of the
// Go heap's metric (the largest objectsPeak) and of the program's RSS
// (the last VmHWM hwm) placed among the events, and returns its path.
func programTrace(t *testing.T, objectsPeak, hwm uint64) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("# carve trace v3\nl 1 uint8 ptrbytes=0 size=1\n")
	const mib = 1 << 20
	for i := 1; i <= 32; i++ {
		fmt.Fprintf(&b, "a %d %d @1\n", i, mib)
	}
	fmt.Fprintf(&b, "g %d %d\n", objectsPeak, 64*mib)
	fmt.Fprintf(&b, "R 32 %d %d test\n", hwm-8*mib, hwm-4*mib)
	fmt.Fprintf(&b, "G 30 32 %d %d\n", 32*mib, 64*mib)
	for i := 1; i <= 32; i += 2 {
		fmt.Fprintf(&b, "f %d\n", i)
	}
	fmt.Fprintf(&b, "g %d %d\n", objectsPeak/2, 32*mib)
	b.WriteString("a 33 1024 @1\n")
	fmt.Fprintf(&b, "G 48 49 %d %d\n", 16*mib+1024, 32*mib)
	fmt.Fprintf(&b, "R 49 %d %d test\n", hwm/2, hwm)
	path := filepath.Join(t.TempDir(), "program.trace")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestProgramRSS replays a trace that holds the program's own RSS: the
// table gives the program's figures as the trace has them, and the go
// row that collected where the program did, and only it, its difference
// from them, split into the heap's objects and the rest.
func TestProgramRSS(t *testing.T) {
	const objectsPeak, hwm = 33 << 20, 60 << 20
	tr, err := traces.Resolve(programTrace(t, objectsPeak, hwm))
	if err != nil {
		t.Fatal(err)
	}
	tables := Run([]traces.Trace{tr}, []Spec{{Alloc: "go"}, {Alloc: "go", GOGC: 50}, {Alloc: "best-fit"}}, Options{Touch: true}, 1, nil)
	tb := tables[0]
	p := tb.Program()
	if p == nil {
		t.Fatal("no program's RSS in a table of a trace with R lines")
	}
	want := Program{Trace: tr.Label, Of: "test", OfText: "the test binary", PeakHWM: hwm, PeakRSS: hwm - 8<<20, Samples: 2, Placed: true, PeakHeapObjects: objectsPeak}
	if *p != want {
		t.Errorf("the program: %+v, want %+v", *p, want)
	}
	for _, r := range tb.Rows {
		if r.Error != "" {
			t.Fatalf("%s: %s", r.Allocator, r.Error)
		}
		v := r.VsProgram
		if r.Collected != "program" {
			if v != nil {
				t.Errorf("%s (collected by %q): a difference from the program's RSS %+v, want none", r.Allocator, r.Collected, *v)
			}
			continue
		}
		if v == nil {
			t.Fatalf("%s: no difference from the program's RSS", r.Allocator)
		}
		t.Logf("%s: %s", r.Allocator, v.Text(p, r))
		want := VsProgram{RSS: r.PeakRSS - hwm, HeapObjects: r.PeakUsed - objectsPeak, Rest: r.PeakRSS - hwm - (r.PeakUsed - objectsPeak), Heap: true}
		if *v != want || r.PeakUsed == 0 {
			t.Errorf("%s: %+v against the program (peak RSS %d, peak used %d), want %+v", r.Allocator, *v, r.PeakRSS, r.PeakUsed, want)
		}
	}
	// A trace without R lines has no program's figures.
	plain, err := traces.Resolve("gen:connection:n=200")
	if err != nil {
		t.Fatal(err)
	}
	if p := Run([]traces.Trace{plain}, []Spec{{Alloc: "best-fit"}}, Options{}, 1, nil)[0].Program(); p != nil {
		t.Errorf("a generated trace: the program's RSS %+v, want none", *p)
	}
}

// TestPacedRowSpreadsFrees replays one trace through the go row that
// collects where the program did and through the paced one: the first
// has the frees at the marks' ends, so its peak live is the 32 MiB alive
// at the first mark's end; the paced row's collections fall between the
// program's, and it gets the frees spread over their spans, before the
// mark's end, so its peak live is less.
func TestPacedRowSpreadsFrees(t *testing.T) {
	tr, err := traces.Resolve(programTrace(t, 33<<20, 60<<20))
	if err != nil {
		t.Fatal(err)
	}
	rs := Run([]traces.Trace{tr}, []Spec{{Alloc: "go"}, {Alloc: "go", Paced: true}}, Options{}, 1, nil)[0].Rows
	for _, r := range rs {
		if r.Error != "" {
			t.Fatalf("%s: %s", r.Allocator, r.Error)
		}
	}
	program, paced := rs[0], rs[1]
	t.Logf("peak live: %s %d B, %s %d B", program.Allocator, program.PeakLive, paced.Allocator, paced.PeakLive)
	if program.Collected != "program" || paced.Collected != "paced" {
		t.Fatalf("the rows collected by %q and %q, want program and paced", program.Collected, paced.Collected)
	}
	if program.PeakLive != 32<<20 {
		t.Errorf("%s: peak live %d B, want the 32 MiB alive at the first mark's end", program.Allocator, program.PeakLive)
	}
	if paced.PeakLive >= program.PeakLive {
		t.Errorf("%s: peak live %d B, not below %s's %d B: its frees are not spread before the marks' ends", paced.Allocator, paced.PeakLive, program.Allocator, program.PeakLive)
	}
}
