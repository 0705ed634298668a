package diff_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/carvelab/carve/lab/diff"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/traces"
)

// objects is a run of allocations of one type in a test trace: n objects
// of size bytes, all live to the end.
type objects struct {
	name       string // the label: a Go type's runtime name ("uint8" for []byte)
	typeSize   int64
	size       uint64
	n          int
	freedFirst int    // how many of them are freed before the end
	site       string // where they were allocated (trace.AttrSite), or ""
}

// writeTrace writes a native trace of a Go program with objs, a
// collection at its end and, if hwm > 0, one sample of the program's
// RSS, and returns its path.
func writeTrace(t *testing.T, name string, hwm uint64, objs ...objects) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	labels := new(trace.Labels)
	w := trace.NewWriter(f)
	if err := w.SetLabels(labels); err != nil {
		t.Fatal(err)
	}
	id, live := uint64(0), uint64(0)
	for _, o := range objs {
		attrs := []trace.Attr{{Key: trace.AttrPtrBytes, Value: "0"}}
		if o.site != "" {
			attrs = append(attrs, trace.Attr{Key: trace.AttrSite, Value: o.site})
		}
		attrs = append(attrs, trace.Attr{Key: trace.AttrSize, Value: decimal(o.typeSize)})
		l, err := labels.Intern(trace.Label{Name: o.name, Attrs: attrs})
		if err != nil {
			t.Fatal(err)
		}
		for i := range o.n {
			id++
			if err := w.Write(trace.Event{Op: trace.Alloc, ID: id, Size: o.size, Label: l}); err != nil {
				t.Fatal(err)
			}
			live += o.size
			if i < o.freedFirst {
				if err := w.Write(trace.Event{Op: trace.Free, ID: id}); err != nil {
					t.Fatal(err)
				}
				live -= o.size
			}
		}
	}
	events := int64(0)
	for _, o := range objs {
		events += int64(o.n + o.freedFirst)
	}
	if err := w.GoCycle(trace.GoCycle{Start: events, End: events, Marked: live}); err != nil {
		t.Fatal(err)
	}
	if hwm > 0 {
		if err := w.ProcessRSS(trace.ProcessRSS{Event: -1, RSS: hwm, HWM: hwm, Of: trace.RSSTestBinary}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return path
}

func decimal(n int64) string { return strconv.FormatInt(n, 10) }

func read(t *testing.T, path string) diff.Trace {
	t.Helper()
	tr, err := traces.Resolve(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := diff.Read(tr)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

const MiB = 1 << 20

// TestCompare: the headline's figures, the groups by type (a type that
// shrinks, one that is new, one gone, one unchanged), and the verdict.
func TestCompare(t *testing.T) {
	bytesA := objects{name: "uint8", typeSize: 1, size: 1 * MiB, n: 30}
	entry := objects{name: "main.Entry", typeSize: 64, size: 64, n: 1000}
	tests := []struct {
		name       string
		hwmA, hwmB uint64
		a, b       []objects
		// groups are the groups in order, each "key A B" (bytes at the
		// peak, "-" for none).
		groups  []string
		verdict string
	}{
		{
			name: "[]byte moved, a pool new",
			hwmA: 100 * MiB, hwmB: 70 * MiB,
			a:       []objects{bytesA, entry},
			b:       []objects{{name: "uint8", typeSize: 1, size: 64 * 1024, n: 2}, entry, {name: "main.pool", typeSize: 4096, size: 4096, n: 16}},
			groups:  []string{"[]byte 31457280 131072", "main.pool - 65536", "main.Entry 64000 64000"},
			verdict: "verdict: the program's peak RSS 100.00 MiB -> 70.00 MiB, -30%; the []byte at the trace's peak 30.00 MiB -> 128.0 KiB: it left the Go heap",
		},
		{
			name:    "no RSS in B: the marked heap",
			hwmA:    100 * MiB,
			a:       []objects{entry},
			b:       []objects{entry, {name: "main.Big", typeSize: MiB, size: MiB, n: 2}},
			groups:  []string{"main.Big - 2097152", "main.Entry 64000 64000"},
			verdict: "verdict: the peak marked heap 62.5 KiB -> 2.06 MiB, +3277%; the main.Big is new: 2.00 MiB at the trace's peak",
		},
		{
			name:    "unchanged",
			a:       []objects{entry},
			b:       []objects{entry},
			groups:  []string{"main.Entry 64000 64000"},
			verdict: "verdict: the peak marked heap 62.5 KiB -> 62.5 KiB, unchanged",
		},
		{
			name:    "a type gone, one grown",
			a:       []objects{entry, {name: "main.Old", typeSize: 128, size: 128, n: 100}},
			b:       []objects{{name: "main.Entry", typeSize: 64, size: 64, n: 2000}},
			groups:  []string{"main.Entry 64000 128000", "main.Old 12800 -"},
			verdict: "verdict: the peak marked heap 75.0 KiB -> 125.0 KiB, +67%; the main.Entry at the trace's peak 62.5 KiB -> 125.0 KiB, +100%",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := read(t, writeTrace(t, "a.trace", tc.hwmA, tc.a...))
			b := read(t, writeTrace(t, "b.trace", tc.hwmB, tc.b...))
			d := diff.Compare(a, b)
			var got []string
			for _, g := range d.Groupings[0].Groups {
				got = append(got, g.Key+" "+figure(g.A)+" "+figure(g.B))
			}
			if strings.Join(got, "; ") != strings.Join(tc.groups, "; ") {
				t.Errorf("groups by type = %q, want %q", got, tc.groups)
			}
			if d.Verdict != tc.verdict {
				t.Errorf("verdict = %q\nwant      %q", d.Verdict, tc.verdict)
			}
			var out bytes.Buffer
			if err := d.WriteText(&out); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), tc.verdict) || !strings.Contains(out.String(), "per type:") {
				t.Errorf("WriteText lacks the verdict or the types:\n%s", out.String())
			}
		})
	}
}

func figure(f *diff.Figures) string {
	if f == nil {
		return "-"
	}
	return decimal(f.Bytes)
}

// TestCompareHeadline: the headline's measures, A -> B, and the
// change; a figure one trace lacks is nil and has no change.
func TestCompareHeadline(t *testing.T) {
	a := read(t, writeTrace(t, "a.trace", 100*MiB, objects{name: "main.T", typeSize: 8, size: 8, n: 10, freedFirst: 4}))
	b := read(t, writeTrace(t, "b.trace", 0, objects{name: "main.T", typeSize: 8, size: 8, n: 5}))
	d := diff.Compare(a, b)
	want := map[string][3]string{ // name: A, B, change
		diff.PeakLive:       {"48", "40", "-8"},
		diff.PeakMarkedHeap: {"48", "40", "-8"},
		diff.ProgramPeakRSS: {decimal(100 * MiB), "null", "null"},
		diff.Allocations:    {"10", "5", "-5"},
	}
	for _, m := range d.Headline {
		got := [3]string{ptrText(m.A), ptrText(m.B), ptrText(m.Change)}
		if got != want[m.Name] {
			t.Errorf("%s: A, B, change = %q, want %q", m.Name, got, want[m.Name])
		}
	}
}

func ptrText(p *int64) string {
	if p == nil {
		return "null"
	}
	return decimal(*p)
}

// TestReadNamesTheFile: a trace that does not parse is an error that
// names it.
func TestReadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.trace")
	if err := os.WriteFile(path, []byte("carve-trace 1\nz 1 2 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := traces.Resolve(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := diff.Read(tr); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Read(%s) = %v, want an error naming it", path, err)
	}
}

// TestCompareSites: traces whose labels carry sites are compared per site
// too: the []byte of one site left, the other's stayed.
func TestCompareSites(t *testing.T) {
	set := objects{name: "uint8", typeSize: 1, size: 8192, n: 100, site: "main.(*Cache).Set (cache.go:88)"}
	parse := objects{name: "uint8", typeSize: 1, size: 512, n: 50, site: "main.parse (req.go:12)"}
	a := read(t, writeTrace(t, "a.trace", 0, set, parse))
	b := read(t, writeTrace(t, "b.trace", 0, parse))
	d := diff.Compare(a, b)
	if len(d.Groupings) != 2 || d.Groupings[1].By != "site" {
		t.Fatalf("groupings %+v, want by type and by site", d.Groupings)
	}
	sites := d.Groupings[1].Groups
	if len(sites) != 2 || sites[0].Key != set.site || sites[0].B != nil || sites[1].Key != parse.site || sites[1].A.Bytes != sites[1].B.Bytes {
		t.Errorf("sites %+v: want %s gone, %s unchanged", sites, set.site, parse.site)
	}
	// Traces without sites have no such grouping.
	plain := read(t, writeTrace(t, "c.trace", 0, objects{name: "main.T", typeSize: 8, size: 8, n: 3}))
	if d := diff.Compare(plain, plain); len(d.Groupings) != 1 {
		t.Errorf("groupings %+v of traces without sites, want by type alone", d.Groupings)
	}
}
