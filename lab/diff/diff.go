// Package diff compares two traces of one program, before and after a
// change, or two tables of replayed rows (carve replay --format json): it
// is carve diff, the way to check that a move the advisor suggested saved
// what it said. See the lab package for the measures it compares.
//
// Two traces are compared by their headline figures (Measure: peak live,
// the peak marked heap, the recorded program's peak RSS, the
// allocations) and by groups of their objects (Group), a Grouping each:
// per type (ByType) and, where the traces' labels carry sites, per
// allocation site (BySite). A verdict (Verdict, its rule in VerdictRule)
// says in one line what changed. Two tables are compared row by row
// (Replays).
package diff

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/trace/summary"
	"github.com/carvelab/carve/lab/traces"
)

// Schema names the version of carve diff's JSON (docs/json.md).
const Schema = "carve.diff/v1"

// The kinds of a report, its JSON's "kind".
const (
	KindTraces = "traces"
	KindReplay = "replay"
)

// A Trace is what a comparison reads of one trace: its summary (its
// frees moved to its marks' ends for a Go program that records its
// collections, as carve stats counts it), and the recorded program's RSS
// samples, if the trace holds them.
type Trace struct {
	Label   string
	Format  string // the format it was read in ("generated" for gen:)
	Summary summary.Trace
	RSS     []trace.ProcessRSS
	// Go says it is a Go program's trace (its heap is the Go heap).
	Go bool
}

// Read reads t once, spooled, and summarises it. An error names t.
func Read(t traces.Trace) (Trace, error) {
	t = t.Spooled()
	src, closer, err := t.Open()
	if err != nil {
		return Trace{}, named(t.Label, err)
	}
	defer closer.Close()
	s, err := summary.OfSource(src)
	if err != nil {
		return Trace{}, named(t.Label, err)
	}
	format := "generated"
	if r, ok := src.(interface{ Format() trace.Format }); ok {
		format = r.Format().String()
	}
	return Trace{Label: t.Label, Format: format, Summary: s, RSS: t.ProcessRSS(), Go: t.Frees() != traces.FreesAsRecorded}, nil
}

// named prefixes err with the file it is about, unless it says so.
func named(label string, err error) error {
	if strings.Contains(err.Error(), label) {
		return err
	}
	return fmt.Errorf("%s: %w", label, err)
}

// A Measure is one headline figure of both traces. A figure a trace does
// not have (no collections recorded, no RSS sampled) is nil.
type Measure struct {
	// Name is the figure's key in JSON ("peak_live"); Text its name in
	// a sentence ("peak live").
	Name string `json:"name"`
	Text string `json:"-"`
	// Unit is "bytes" or "count".
	Unit string `json:"unit"`
	A    *int64 `json:"a"`
	B    *int64 `json:"b"`
	// Change is B - A, Percent 100 × Change / A: nil unless both have
	// the figure (Percent unless A is above 0).
	Change  *int64   `json:"change"`
	Percent *float64 `json:"percent"`
}

func measure(name, text, unit string, a, b *int64) Measure {
	m := Measure{Name: name, Text: text, Unit: unit, A: a, B: b}
	if a != nil && b != nil {
		d := *b - *a
		m.Change = &d
		if *a > 0 {
			p := 100 * float64(d) / float64(*a)
			m.Percent = &p
		}
	}
	return m
}

// The Names of the headline's measures, in the order Traces lists them.
const (
	PeakLive       = "peak_live"
	PeakMarkedHeap = "peak_marked_heap"
	ProgramPeakRSS = "program_peak_rss"
	Allocations    = "allocations"
)

func headline(a, b Trace) []Measure {
	of := func(t Trace, f func(Trace) (int64, bool)) *int64 {
		if v, ok := f(t); ok {
			return &v
		}
		return nil
	}
	pair := func(name, text, unit string, f func(Trace) (int64, bool)) Measure {
		return measure(name, text, unit, of(a, f), of(b, f))
	}
	return []Measure{
		pair(PeakLive, "peak live", "bytes", func(t Trace) (int64, bool) { return clamp(t.Summary.PeakLive), true }),
		pair(PeakMarkedHeap, "the peak marked heap", "bytes", func(t Trace) (int64, bool) {
			return clamp(t.Summary.PeakMarked), len(t.Summary.Cycles) > 0
		}),
		pair(ProgramPeakRSS, "the program's peak RSS", "bytes", func(t Trace) (int64, bool) {
			_, hwm, ok := trace.RSSPeak(t.RSS)
			return clamp(hwm), ok
		}),
		pair(Allocations, "allocations", "count", func(t Trace) (int64, bool) {
			ops := t.Summary.Ops
			return ops[trace.Alloc] + ops[trace.Calloc] + ops[trace.Memalign], true
		}),
	}
}

// clamp returns a trace's byte count as an int64: a trace of impossible
// sizes may pass 2^63.
func clamp(n uint64) int64 { return int64(min(n, math.MaxInt64)) }

// Figures are one group's objects in one trace: their bytes and their
// count live at the trace's peak (of live bytes), and their allocations.
type Figures struct {
	Bytes   int64 `json:"bytes_at_peak"`
	Objects int64 `json:"objects_at_peak"`
	Allocs  int64 `json:"allocs"`
}

func (f *Figures) add(g Figures) {
	f.Bytes += g.Bytes
	f.Objects += g.Objects
	f.Allocs += g.Allocs
}

// A Group is the objects of one key in both traces: A's and B's figures,
// nil in a trace that has no object of the key (the group is new in B,
// or gone from it).
type Group struct {
	Key string   `json:"key"`
	A   *Figures `json:"a"`
	B   *Figures `json:"b"`
}

// Change is the group's bytes at the peak in B less those in A.
func (g Group) Change() int64 { return g.B.bytes() - g.A.bytes() }

// most is the group's bytes at the peak in the trace that has more.
func (g Group) most() int64 { return max(g.A.bytes(), g.B.bytes()) }

func (f *Figures) bytes() int64 {
	if f == nil {
		return 0
	}
	return f.Bytes
}

// A Grouping keys a trace's objects one way (by type; by allocation
// site) and sums each key's figures.
type Grouping struct {
	// By names the grouping: "type".
	By   string
	Keys func(summary.Trace) map[string]Figures
}

// ByType groups the objects by their type's Go name (LabelStat.GoName:
// "[]byte"); the objects of no label are "(no label)", as carve stats
// names them.
var ByType = Grouping{By: "type", Keys: func(s summary.Trace) map[string]Figures {
	m := make(map[string]Figures, len(s.Labels))
	for _, l := range s.Labels {
		key := l.GoName()
		if l.Label == 0 {
			key = NoLabel
		}
		f := m[key]
		f.add(Figures{Bytes: clamp(l.Bytes), Objects: l.Objects, Allocs: l.Allocs})
		m[key] = f
	}
	return m
}}

// BySite groups the objects by where the program allocated them
// (summary.Trace.Sites: "Cache.Set (cache.go:88)"), for traces
// whose labels carry sites (carve record of a go test: an object of a
// size several sites share has one drawn by share); the objects of no
// site are in no group.
var BySite = Grouping{By: "site", Keys: func(s summary.Trace) map[string]Figures {
	m := make(map[string]Figures, len(s.Sites))
	for _, l := range s.Sites {
		key := l.Site
		f := m[key]
		f.add(Figures{Bytes: clamp(l.Bytes), Objects: l.Objects, Allocs: l.Allocs})
		m[key] = f
	}
	return m
}}

// NoLabel is the key of the objects of no label.
const NoLabel = "(no label)"

// Groups joins g's keys of a and b, the largest change of bytes at the
// peak (either way) first; of equal changes, the most bytes in either
// trace first, then by key. It is empty when neither trace
// has labels.
func (g Grouping) Groups(a, b summary.Trace) []Group {
	ka, kb := g.Keys(a), g.Keys(b)
	var out []Group
	for k, f := range ka {
		grp := Group{Key: k, A: &f}
		if fb, ok := kb[k]; ok {
			grp.B = &fb
		}
		out = append(out, grp)
	}
	for k, f := range kb {
		if _, ok := ka[k]; !ok {
			out = append(out, Group{Key: k, B: &f})
		}
	}
	slices.SortFunc(out, func(x, y Group) int {
		return cmp.Or(cmp.Compare(abs(y.Change()), abs(x.Change())), cmp.Compare(y.most(), x.most()), strings.Compare(x.Key, y.Key))
	})
	return out
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// Grouped is one grouping's groups of a comparison.
type Grouped struct {
	By     string  `json:"by"`
	Groups []Group `json:"groups"`
}

// Side names one input of a comparison.
type Side struct {
	// Trace is the TRACE argument, Format what it was read as; File and
	// Schema name a table of rows (carve.replay/...).
	Trace  string `json:"trace,omitempty"`
	Format string `json:"format,omitempty"`
	File   string `json:"file,omitempty"`
	Schema string `json:"schema,omitempty"`
	// RSSOf names the process whose RSS the trace sampled
	// (trace.ProcessRSS.Of), if it did.
	RSSOf string `json:"rss_of,omitempty"`
}

// Traces is the comparison of two traces, as carve diff prints it and
// as its JSON is.
type Traces struct {
	Schema    string    `json:"schema"`
	Kind      string    `json:"kind"`
	A         Side      `json:"a"`
	B         Side      `json:"b"`
	Headline  []Measure `json:"headline"`
	Groupings []Grouped `json:"groupings"`
	Verdict   string    `json:"verdict"`
	// Go says both are Go programs' traces: their heaps are Go heaps.
	Go bool `json:"go"`
}

// Compare compares trace a (before) with b (after).
func Compare(a, b Trace) Traces {
	side := func(t Trace) Side {
		s := Side{Trace: t.Label, Format: t.Format}
		if len(t.RSS) > 0 {
			s.RSSOf = t.RSS[0].Of
		}
		return s
	}
	d := Traces{Schema: Schema, Kind: KindTraces, A: side(a), B: side(b), Headline: headline(a, b), Go: a.Go && b.Go}
	d.Groupings = []Grouped{{By: ByType.By, Groups: ByType.Groups(a.Summary, b.Summary)}}
	if len(a.Summary.Sites) > 0 || len(b.Summary.Sites) > 0 {
		d.Groupings = append(d.Groupings, Grouped{By: BySite.By, Groups: BySite.Groups(a.Summary, b.Summary)})
	}
	d.Verdict = Verdict(d.Headline, d.Groupings[0].Groups, d.Go)
	return d
}
