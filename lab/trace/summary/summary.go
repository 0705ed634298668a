package summary

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/carvelab/carve/internal/size"

	"github.com/carvelab/carve/lab/trace"
)

// Trace describes a trace as a whole: what it asks of an allocator,
// before any allocator runs it. "Live" is the lab's word: the bytes
// requested and not yet freed.
type Trace struct {
	// Events counts the events, and Ops the events of each Op (indexed
	// by Op; Ops[0] is unused).
	Events int64
	Ops    [trace.NumOps]int64

	// Requested is the sum of the sizes of all allocations and of the
	// new sizes of reallocs.
	Requested uint64
	// Smallest and Largest are the sizes of the smallest and largest
	// requests (allocations and reallocs); Smallest ignores requests of
	// 0 bytes, which Zero counts.
	Smallest, Largest uint64
	Zero              int64

	// PeakLive is the most bytes live at once, first reached after event
	// number PeakAt (0-based); PeakObjects the most objects live at once.
	PeakLive    uint64
	PeakAt      int64
	PeakObjects int64
	// EndLive and EndObjects are what is live after the last event.
	EndLive    uint64
	EndObjects int64
	// Overflow reports live bytes that passed 2^64 - 1 (a trace of
	// impossible sizes): PeakLive, EndLive and Requested are then capped
	// at 2^64 - 1, and mean "at least that". The sums are kept exact in
	// 128 bits, so the figures below the cap are right.
	Overflow bool

	// Sizes is the histogram of request sizes (allocations and reallocs)
	// by powers of two: Sizes[k] counts the requests of the sizes
	// Bucket(k) spans, Sizes[0] those of 0 bytes.
	Sizes [65]int64
	// Lifetimes is the histogram of the lifetimes of freed objects, in
	// events from the allocation to the free, in the buckets of Sizes:
	// Lifetimes[0] is 0, as an object lives one event at least. Objects
	// still live at the end are not in it (EndObjects counts them).
	Lifetimes [65]int64

	// Trace errors, as a replayer would find them (each event is counted
	// and otherwise ignored): a Free of an ID not live, a Realloc of an ID
	// not live, an allocation of an ID already live.
	UnknownFrees, UnknownReallocs, LiveAllocs int64

	// Labels describes the objects of each label, for a trace whose
	// events carry labels (a Go execution trace, a native trace of
	// version 2): nil otherwise. The labels most live at the peak come
	// first (see LabelStat).
	Labels []LabelStat
	// Sites are, for a trace whose labels carry sites (trace.AttrSite), the
	// objects of each site, as Labels are of each type: Site is the site,
	// Name the types allocated there (joined by ", "), Size and PtrBytes
	// the type's when there is one.
	Sites []LabelStat
	// TypeSites are, for such a trace, the objects of each type at each
	// site (each label that carries a site): Name the type, Site the
	// site.
	TypeSites []LabelStat

	// Cycles are the collections of a Go program whose frees were moved
	// to the marks that proved the objects dead (trace.MoveFrees), each with
	// the bytes live in the events at its mark's end: the marked heap,
	// as the events count it (the runtime's own count is the cycle's
	// Marked). nil for a trace without cycles, and for one whose frees
	// stay where the sweep made them: its live bytes then hold the
	// garbage of a cycle.
	Cycles []MarkedCycle
	// PeakMarked is the largest Live of Cycles: the most of the heap a
	// collection found reachable.
	PeakMarked uint64

	// Reader is the trace.Reader's own count of what it read and had to make of
	// the lines that do not fit an object's life.
	Reader trace.ReaderStats
}

// A MarkedCycle is one collection of a Go program and the bytes live in
// the events at its mark's end.
type MarkedCycle struct {
	trace.GoCycle
	Live uint64
}

// Bucket returns the least and the most value that bucket k (0 to 64)
// of a histogram of Trace counts (Sizes, Lifetimes): 0 for bucket 0, 2^(k-1)
// to 2^k - 1 for the others.
func Bucket(k int) (lo, hi uint64) {
	if k == 0 {
		return 0, 0
	}
	lo = 1 << (k - 1)
	return lo, lo<<1 - 1 // bucket 64: 2^64 - 1, by the wrap
}

// cycleSource is a trace.Source that says where its collections' marks ended
// (trace.MoveFrees's): MarkEnds returns those reached so far, shared.
type cycleSource interface {
	MarkEnds() []trace.GoCycle
}

// LabelStat describes the objects of one label of a trace: for a Go
// execution trace, the objects of one type.
type LabelStat struct {
	// Label is the label's number in the trace's table, 0 for the
	// objects without a label; Name its name ("" for 0).
	Label uint32
	Name  string
	// Objects and Bytes are the label's objects and their bytes live at
	// the trace's peak (after event PeakAt); Share is Bytes / PeakLive.
	Objects int64
	Bytes   uint64
	Share   float64
	// PeakBytes is the most bytes of the label live at once, at any
	// point of the trace.
	PeakBytes uint64
	// Allocs counts the label's allocations; Freed those of its objects
	// that were freed, and MeanLife is their mean lifetime in events
	// (from the allocation to the free; 0 when none was freed).
	Allocs, Freed int64
	MeanLife      float64
	// MinSize and MaxSize are the sizes of its smallest and largest
	// allocations (a Go trace's sizes are the heap's size classes): a
	// type whose objects come in one size has them equal.
	MinSize, MaxSize uint64
	// Size and PtrBytes are the label's attributes trace.AttrSize and
	// trace.AttrPtrBytes (a Go type's size, and its bytes that may hold
	// pointers), -1 when it has none.
	Size, PtrBytes int64
	// Site is, in Trace.Sites, where its objects were allocated
	// (trace.AttrSite); "" in Trace.Labels, where a type of several sites is
	// one LabelStat.
	Site string
}

// Of reads r to its end and describes the trace. It keeps one map
// entry per live object.
func Of(r *trace.Reader) (Trace, error) {
	s, err := OfSource(r)
	s.Reader = r.Stats()
	return s, err
}

// OfSource is Of for any source of events; Trace.Reader is
// left zero. Trace.Labels is filled when src is a trace.LabeledSource with a
// table.
func OfSource(src trace.Source) (Trace, error) {
	var s Trace
	type obj struct {
		size  uint64
		born  int64
		label uint32
	}
	labels := trace.LabelsOf(src)
	ls := &labelGroups{labels: labels}
	var live trace.IDs[obj]
	var cur u128
	cs, _ := src.(cycleSource)
	var cycles []trace.GoCycle
	marked := func() { // the cycles whose mark ended after s.Events events
		for len(s.Cycles) < len(cycles) && cycles[len(s.Cycles)].End <= s.Events {
			live, _ := cur.capped()
			s.Cycles = append(s.Cycles, MarkedCycle{cycles[len(s.Cycles)], live})
			s.PeakMarked = max(s.PeakMarked, live)
		}
	}
	batch := make([]trace.Event, 1024)
	for {
		n, err := src.Read(batch)
		if cs != nil {
			cycles = cs.MarkEnds()
			marked()
		}
		for _, e := range batch[:n] {
			if cycles != nil {
				marked()
			}
			at := s.Events
			s.Events++
			s.Ops[e.Op]++
			switch e.Op {
			case trace.Alloc, trace.Calloc, trace.Memalign:
				s.request(e.Size)
				if old, ok := live.Get(e.ID); ok {
					s.LiveAllocs++
					cur = cur.sub(old.size)
					ls.change(old.label, -1, -int64(old.size))
				}
				live.Set(e.ID, obj{e.Size, at, e.Label})
				cur = cur.add(e.Size)
				ls.change(e.Label, 1, int64(e.Size))
				ls.allocated(e.Label, e.Size)
			case trace.Realloc:
				old, ok := live.Get(e.ID)
				if !ok {
					s.UnknownReallocs++
					continue
				}
				s.request(e.Size)
				cur = cur.sub(old.size).add(e.Size)
				if e.Label != 0 && e.Label != old.label { // the object is the realloc's site's from now on
					ls.change(old.label, -1, -int64(old.size))
					ls.change(e.Label, 1, int64(e.Size))
					ls.allocated(e.Label, e.Size)
					old.label = e.Label
				} else {
					ls.change(old.label, 0, int64(e.Size)-int64(old.size))
				}
				live.Set(e.ID, obj{e.Size, old.born, old.label})
			case trace.Free:
				old, ok := live.Get(e.ID)
				if !ok {
					s.UnknownFrees++
					continue
				}
				live.Delete(e.ID)
				cur = cur.sub(old.size)
				s.Lifetimes[bits.Len64(uint64(at-old.born))]++
				ls.change(old.label, -1, -int64(old.size))
				ls.freed(old.label, float64(at-old.born))
			}
			if v, over := cur.capped(); v > s.PeakLive || over && !s.Overflow {
				s.PeakLive, s.PeakAt = v, at
				s.Overflow = s.Overflow || over
				ls.peak()
			}
			if int64(live.Len()) > s.PeakObjects {
				s.PeakObjects = int64(live.Len())
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return s, err
		}
	}
	marked()
	s.EndLive, _ = cur.capped()
	s.EndObjects = int64(live.Len())
	if labels != nil && labels.Len() > 0 { // a C program's trace of version 3 has an empty table
		s.Labels, s.Sites = ls.types.stats(ls.typeLabel, s.PeakLive), ls.sites.stats(ls.siteLabel, s.PeakLive)
		s.TypeSites = ls.typeSites.stats(ls.ownLabel, s.PeakLive)
		for i := range s.Labels {
			s.Labels[i].Site = "" // a type's, of all its sites
		}
	}
	return s, nil
}

// labelGroups counts a trace's objects by type (every label of a name:
// a type allocated at several sites has a label per site) and by site,
// as labelCounts counts them by label.
type labelGroups struct {
	labels                  *trace.Labels
	types, sites, typeSites labelCounts
	of                      []labelGroup // by label number, as found
	typeOf                  map[string]uint32
	siteOf                  map[string]uint32
	typeLabels              []uint32 // by type group: its first label
	siteNames               []siteGroup
}

// labelGroup is the type and the site groups of a label (0: none, not
// found yet).
type labelGroup struct{ typ, site uint32 }

// siteGroup is a site group's site and the labels (types) allocated
// there.
type siteGroup struct {
	site   string
	labels []uint32
}

// group returns label l's groups.
func (g *labelGroups) group(l uint32) labelGroup {
	if l == 0 || g.labels == nil {
		return labelGroup{}
	}
	if int(l) < len(g.of) && g.of[l].typ != 0 {
		return g.of[l]
	}
	for int(l) >= len(g.of) {
		g.of = append(g.of, labelGroup{})
	}
	lab, _ := g.labels.Label(l)
	if g.typeOf == nil {
		g.typeOf, g.siteOf = map[string]uint32{}, map[string]uint32{}
		g.typeLabels, g.siteNames = []uint32{0}, []siteGroup{{}}
	}
	t := g.typeOf[lab.Name]
	if t == 0 {
		t = uint32(len(g.typeLabels))
		g.typeOf[lab.Name] = t
		g.typeLabels = append(g.typeLabels, l)
	}
	var s uint32
	if site, ok := lab.Attr(trace.AttrSite); ok && site != "" {
		if s = g.siteOf[site]; s == 0 {
			s = uint32(len(g.siteNames))
			g.siteOf[site] = s
			g.siteNames = append(g.siteNames, siteGroup{site: site})
		}
		g.siteNames[s].labels = append(g.siteNames[s].labels, l)
	}
	g.of[l] = labelGroup{t, s}
	return g.of[l]
}

func (g *labelGroups) change(l uint32, objects, bytes int64) {
	gr := g.group(l)
	g.types.change(gr.typ, objects, bytes)
	if gr.site != 0 {
		g.sites.change(gr.site, objects, bytes)
		g.typeSites.change(l, objects, bytes)
	}
}

func (g *labelGroups) allocated(l uint32, size uint64) {
	gr := g.group(l)
	g.types.allocated(gr.typ, size)
	if gr.site != 0 {
		g.sites.allocated(gr.site, size)
		g.typeSites.allocated(l, size)
	}
}

// freed counts a free of an object of label l that lived life events.
func (g *labelGroups) freed(l uint32, life float64) {
	gr := g.group(l)
	for _, c := range []*labelCount{g.types.of(gr.typ), g.sites.of(gr.site), g.typeSites.of(l)} {
		c.freed++
		c.life += life
	}
}

func (g *labelGroups) peak() {
	g.types.peak()
	g.sites.peak()
	g.typeSites.peak()
}

// ownLabel returns label l itself, for the counts by label.
func (g *labelGroups) ownLabel(l uint32) (trace.Label, uint32, bool) {
	lab, ok := g.labels.Label(l)
	return lab, l, ok
}

// typeLabel returns type group t's label (its first), and its number.
func (g *labelGroups) typeLabel(t uint32) (trace.Label, uint32, bool) {
	if int(t) >= len(g.typeLabels) || t == 0 {
		return trace.Label{}, 0, false
	}
	l, ok := g.labels.Label(g.typeLabels[t])
	return l, g.typeLabels[t], ok
}

// siteLabel returns site group s as a label: the site, the types
// allocated there, and the attributes of its type if it has one.
func (g *labelGroups) siteLabel(s uint32) (trace.Label, uint32, bool) {
	if int(s) >= len(g.siteNames) || s == 0 {
		return trace.Label{}, 0, false
	}
	sg := g.siteNames[s]
	var names []string
	var attrs []trace.Attr
	for _, l := range sg.labels {
		lab, _ := g.labels.Label(l)
		if !slices.Contains(names, lab.Name) {
			names = append(names, lab.Name)
		}
		attrs = lab.Attrs
	}
	if len(names) > 1 {
		attrs = []trace.Attr{{Key: trace.AttrSite, Value: sg.site}}
	}
	return trace.Label{Name: strings.Join(names, ", "), Attrs: attrs}, sg.labels[0], true
}

// labelCounts keeps the live objects and bytes of each label as a trace
// is read, and their values at the trace's peak: the labels changed since
// the last peak are listed (dirty), so that reaching a new peak copies
// only those, and the whole costs O(1) an event.
type labelCounts struct {
	c     []labelCount // by label number
	dirty []uint32
}

type labelCount struct {
	objects, atPeakObjects int64
	bytes, atPeakBytes     int64
	peakBytes              int64
	allocs, freed          int64
	minSize, maxSize       uint64  // of its allocations
	life                   float64 // the sum of the lifetimes of the freed
	isDirty, seen          bool
}

func (ls *labelCounts) of(l uint32) *labelCount {
	if int(l) >= len(ls.c) {
		ls.c = append(ls.c, make([]labelCount, int(l)+1-len(ls.c))...)
	}
	return &ls.c[l]
}

// change adds objects and bytes to label l's live counts.
func (ls *labelCounts) change(l uint32, objects, bytes int64) {
	c := ls.of(l)
	c.objects += objects
	c.bytes += bytes
	c.peakBytes = max(c.peakBytes, c.bytes)
	c.seen = true
	if !c.isDirty {
		c.isDirty = true
		ls.dirty = append(ls.dirty, l)
	}
}

// allocated counts an allocation of size bytes of label l.
func (ls *labelCounts) allocated(l uint32, size uint64) {
	c := ls.of(l)
	if c.allocs == 0 || size < c.minSize {
		c.minSize = size
	}
	c.maxSize = max(c.maxSize, size)
	c.allocs++
}

// peak records the live counts as those at the trace's peak.
func (ls *labelCounts) peak() {
	for _, l := range ls.dirty {
		c := &ls.c[l]
		c.atPeakObjects, c.atPeakBytes = c.objects, c.bytes
		c.isDirty = false
	}
	ls.dirty = ls.dirty[:0]
}

// stats returns the labels' statistics, most bytes at the peak first
// (then the highest peak of their own, then by name); label says what
// each number counted stands for, and the number of the label it is.
func (ls *labelCounts) stats(label func(uint32) (trace.Label, uint32, bool), peak uint64) []LabelStat {
	n := 0
	for l := range ls.c {
		if ls.c[l].seen {
			n++
		}
	}
	out := make([]LabelStat, 0, n)
	for l := range ls.c {
		c := &ls.c[l]
		if !c.seen {
			continue
		}
		st := LabelStat{
			Label: uint32(l), Objects: c.atPeakObjects, Bytes: uint64(c.atPeakBytes),
			PeakBytes: uint64(c.peakBytes), Allocs: c.allocs, Freed: c.freed, Size: -1, PtrBytes: -1,
			MinSize: c.minSize, MaxSize: c.maxSize,
		}
		if peak > 0 {
			st.Share = float64(st.Bytes) / float64(peak)
		}
		if c.freed > 0 {
			st.MeanLife = c.life / float64(c.freed)
		}
		if lab, number, ok := label(uint32(l)); ok {
			st.Name, st.Label = lab.Name, number
			st.Site, _ = lab.Attr(trace.AttrSite)
			if v, ok := lab.Uint(trace.AttrSize); ok && v <= math.MaxInt64 {
				st.Size = int64(v)
			}
			if v, ok := lab.Uint(trace.AttrPtrBytes); ok && v <= math.MaxInt64 {
				st.PtrBytes = int64(v)
			}
		}
		out = append(out, st)
	}
	slices.SortStableFunc(out, func(a, b LabelStat) int {
		return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), cmp.Compare(b.PeakBytes, a.PeakBytes), strings.Compare(a.Name, b.Name))
	})
	return out
}

// LabelColumns name the columns of LabelCells.
var LabelColumns = []string{"bytes at peak", "share", "objects", "own peak", "allocs", "mean life", "ptr bytes", "size", "label"}

// LabelCells formats s.Labels as the rows of a table of LabelColumns,
// the first n labels (all when n is 0 or less) and a row for the rest:
// for each label the bytes and objects live at the trace's peak, their
// share of the peak, the label's own peak, its allocations, the mean
// lifetime of its objects in events, its pointer bytes and its size (for
// a Go trace: the type's, a slice's element's; "-" when the label has no
// such attribute), and its name as a Go programmer writes the type
// (LabelStat.GoName: "[]byte"). It is nil for a trace without labels.
func (s Trace) LabelCells(n int) [][]string {
	return s.cells(s.Labels, n, "labels", func(l LabelStat) string {
		if l.Label == 0 {
			return "(no label)"
		}
		return l.GoName()
	})
}

// SiteCells formats s.Sites as LabelCells formats s.Labels, each named
// by its site and the types allocated there ("goconn.Run (goconn.go:48):
// []byte"; a C program's, its site alone). It is nil for a trace whose labels carry no sites.
func (s Trace) SiteCells(n int) [][]string {
	return s.cells(s.Sites, n, "sites", func(l LabelStat) string {
		if l.Name == "" { // a C program's site: no type
			return l.Site
		}
		return l.Site + ": " + l.Name
	})
}

// cells formats the first n of all (all of them when n is 0 or less)
// and a row for the rest ("(12 more labels)", of what), each named by
// name.
func (s Trace) cells(all []LabelStat, n int, what string, name func(LabelStat) string) [][]string {
	rows := all
	if n > 0 && len(rows) > n {
		rows = rows[:n]
	}
	attr := func(v int64) string {
		if v < 0 {
			return "-"
		}
		return strconv.FormatInt(v, 10)
	}
	share := func(b uint64) string {
		if s.PeakLive == 0 {
			return "0.0%"
		}
		return strconv.FormatFloat(100*float64(b)/float64(s.PeakLive), 'f', 1, 64) + "%"
	}
	var out [][]string
	for _, l := range rows {
		life := "-"
		if l.Freed > 0 {
			life = strconv.FormatFloat(l.MeanLife, 'f', 0, 64)
		}
		out = append(out, []string{size.Digits3(l.Bytes), strconv.FormatFloat(100*l.Share, 'f', 1, 64) + "%", strconv.FormatInt(l.Objects, 10),
			size.Digits3(l.PeakBytes), strconv.FormatInt(l.Allocs, 10), life, attr(l.PtrBytes), attr(l.Size), name(l)})
	}
	if rest := all[len(rows):]; len(rest) > 0 {
		var objects int64
		var bytes uint64
		for _, l := range rest {
			objects += l.Objects
			bytes += l.Bytes
		}
		out = append(out, []string{size.Digits3(bytes), share(bytes), strconv.FormatInt(objects, 10), "", "", "", "", "", fmt.Sprintf("(%d more %s)", len(rest), what)})
	}
	return out
}

// WriteLabels prints s.Labels as a table of LabelCells(n). It prints
// nothing for a trace without labels.
func (s Trace) WriteLabels(w io.Writer, n int) error {
	if len(s.Labels) == 0 {
		return nil
	}
	return writeCells(w, s.LabelCells(n))
}

// WriteSites prints s.Sites as a table of SiteCells(n). It prints
// nothing for a trace whose labels carry no sites.
func (s Trace) WriteSites(w io.Writer, n int) error {
	if len(s.Sites) == 0 {
		return nil
	}
	return writeCells(w, s.SiteCells(n))
}

// writeCells prints rows of LabelColumns, aligned.
func writeCells(w io.Writer, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	last := len(LabelColumns) - 1
	line := func(c []string) {
		fmt.Fprintf(tw, "%s\t  %s\n", strings.Join(c[:last], "\t"), c[last])
	}
	line(LabelColumns)
	for _, c := range rows {
		line(c)
	}
	return tw.Flush()
}

// request counts one requested size.
// u128 is a byte count that does not wrap: a trace's sizes are 64-bit, and
// their sum may not be.
type u128 struct{ hi, lo uint64 }

func (x u128) add(n uint64) u128 {
	lo, carry := bits.Add64(x.lo, n, 0)
	return u128{x.hi + carry, lo}
}

func (x u128) sub(n uint64) u128 {
	lo, borrow := bits.Sub64(x.lo, n, 0)
	return u128{x.hi - borrow, lo}
}

// capped returns x, or 2^64 - 1 and true when x is larger.
func (x u128) capped() (uint64, bool) {
	if x.hi != 0 {
		return math.MaxUint64, true
	}
	return x.lo, false
}

func (s *Trace) request(size uint64) {
	if r, carry := bits.Add64(s.Requested, size, 0); carry != 0 {
		s.Requested, s.Overflow = math.MaxUint64, true
	} else {
		s.Requested = r
	}
	s.Sizes[bits.Len64(size)]++
	if size == 0 {
		s.Zero++
		return
	}
	if s.Smallest == 0 || size < s.Smallest {
		s.Smallest = size
	}
	if size > s.Largest {
		s.Largest = size
	}
}

// Robson returns Robson's bounds on the heap that the worst trace with
// this one's peak live bytes M and ratio n of largest to smallest request
// can force (J. M. Robson, "Worst case fragmentation of first fit and best
// fit storage allocation strategies", 1977), as the FREENIX paper quotes
// them: about M log2 n for first fit, about M n for best fit. They are
// the scale against which a real allocator's footprint is small. Both are
// 0 for a trace without requests.
func (s Trace) Robson() (firstFit, bestFit float64) {
	if s.Smallest == 0 {
		return 0, 0
	}
	m := float64(s.PeakLive)
	n := float64(s.Largest) / float64(s.Smallest)
	return m * math.Max(1, math.Log2(n)), m * n
}
