package rows

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/carvelab/carve/internal/text"
	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/trace/summary"
	"github.com/carvelab/carve/lab/traces"
	"github.com/carvelab/carve/pool"
)

// CheckRoutes checks routes as the lab's flags give them, before any
// trace is read: a route by size into a pool of a size pool.New refuses,
// a label or a size routed twice. Its error is one line.
func CheckRoutes(routes []replay.Route) error {
	labels, sizes := map[string]bool{}, map[int]bool{}
	for _, r := range routes {
		switch {
		case r.ByLabel() && labels[r.Arg()]:
			return fmt.Errorf("type %s given twice to --pool, --arena and --heap: its objects go to one place", r.Label)
		case !r.ByLabel() && sizes[r.Size]:
			return fmt.Errorf("size %d given twice to --pool, --arena and --heap: its requests go to one place", r.Size)
		case !r.ByLabel() && r.Into == replay.IntoPools:
			p, err := pool.New(r.Size)
			if err != nil {
				return fmt.Errorf("--pool %d: %w", r.Size, err)
			}
			p.Close()
		}
		labels[r.Arg()], sizes[r.Size] = r.ByLabel(), !r.ByLabel()
	}
	return nil
}

// ResolveRoutes checks routes against the traces they will be replayed
// over, reading each trace's labels and request sizes once (a scan of
// its events, spooled: the rows read the same spool), before any
// replay: a type no trace's label is (summary.FindLabel, with the
// nearest names), or a size no request of a trace has (with the nearest
// sizes it has), is an error of one line. It returns the routes
// resolved: each route by label with the label's raw name (Label) and
// its Go name (Name), and, into pools, for a type of one size (a struct,
// not a slice: summary.LabelStat.GoName), its Chunk at the type's own
// size, as pool.NewOf[T] holds it. A type must resolve alike in every
// trace.
func ResolveRoutes(ts []traces.Trace, routes []replay.Route) ([]replay.Route, error) {
	if err := CheckRoutes(routes); err != nil {
		return nil, err
	}
	out := slices.Clone(routes)
	for ti, t := range ts {
		sc, err := scan(t, routes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.Label, err)
		}
		for i, r := range routes {
			got, err := sc.resolve(r, t.Label)
			if err != nil {
				return nil, err
			}
			if ti > 0 && got != out[i] {
				return nil, fmt.Errorf("%s is %s in %s and %s in %s: replay them one at a time", r.Arg(), describe(out[i]), ts[0].Label, describe(got), t.Label)
			}
			out[i] = got
		}
	}
	return out, nil
}

// describe says what a resolved route takes, for an error.
func describe(r replay.Route) string {
	s := "label " + strconv.Quote(r.Label)
	if r.Chunk > 0 {
		s += fmt.Sprintf(" of %d bytes", r.Chunk)
	}
	return s
}

// scanned is what ResolveRoutes reads of a trace.
type scanned struct {
	labels []summary.LabelStat
	sites  []summary.LabelStat
	sizes  map[uint64]bool // the sizes of the requests, if asked
}

// scan reads t's labels (and, if a route is by size, its requests'
// sizes).
func scan(t traces.Trace, routes []replay.Route) (scanned, error) {
	bySize := slices.ContainsFunc(routes, func(r replay.Route) bool { return !r.ByLabel() })
	src, closer, err := t.Spooled().Open()
	if err != nil {
		return scanned{}, err
	}
	defer closer.Close()
	tee := &sizesOf{Source: src}
	if bySize {
		tee.sizes = map[uint64]bool{}
	}
	sum, err := summary.OfSource(tee)
	if err != nil {
		return scanned{}, err
	}
	return scanned{labels: sum.Labels, sites: sum.Sites, sizes: tee.sizes}, nil
}

// resolve resolves r against the trace called name.
func (sc scanned) resolve(r replay.Route, name string) (replay.Route, error) {
	if !r.ByLabel() {
		if sc.sizes[uint64(r.Size)] {
			return r, nil
		}
		return r, fmt.Errorf("no request of %s is of %d bytes%s", name, r.Size, sc.nearSizes(r.Size))
	}
	if typed := slices.ContainsFunc(sc.labels, func(s summary.LabelStat) bool { return s.Name != "" }); !typed && (r.Label != "" || len(sc.sites) == 0) {
		if len(sc.sites) > 0 {
			return r, fmt.Errorf("no type %q in %s: its labels are a C program's allocation sites, of no type (route them by site=PATTERN alone)", r.Label, name)
		}
		return r, fmt.Errorf("no type %q in %s: its events carry no labels (a Go program's trace, recorded by carve record, has its types)", r.Label, name)
	}
	if r.Site != "" {
		if err := sc.resolveSite(r, name); err != nil {
			return r, err
		}
		if r.Label == "" {
			return r, nil // every type allocated there
		}
	}
	// A route already resolved (by its Go name, Name) reads the same.
	asked := cmp.Or(r.Name, r.Label)
	st, err := summary.FindLabel(sc.labels, asked)
	if err != nil {
		if le, ok := err.(*summary.LabelError); ok {
			le.In = name
		}
		return r, err
	}
	r.Label, r.Name, r.Chunk = st.Name, st.GoName(), 0
	if r.Site != "" && !slices.ContainsFunc(sc.sites, func(s summary.LabelStat) bool {
		return trace.AtSite(s.Site, r.Site) && slices.Contains(strings.Split(s.Name, ", "), st.Name)
	}) {
		return r, fmt.Errorf("no %s allocated at a site %q names in %s (carve stats --by site lists its sites and the types of each)", st.GoName(), r.Site, name)
	}
	if r.Into == replay.IntoPools && st.GoName() == st.Name && st.Size > 0 && uint64(st.Size) <= st.MinSize {
		r.Chunk = int(st.Size)
	}
	return r, nil
}

// resolveSite checks that r's site pattern names a site of the trace
// called name, with the nearest sites if not.
func (sc scanned) resolveSite(r replay.Route, name string) error {
	var sites []string
	for _, s := range sc.sites {
		if trace.AtSite(s.Site, r.Site) {
			return nil
		}
		// Its function and its file and line, the patterns a user writes.
		fn, at, _ := strings.Cut(s.Site, " (")
		sites = append(sites, fn, strings.TrimSuffix(at, ")"))
	}
	if len(sites) == 0 {
		return fmt.Errorf("no site %q in %s: its labels carry no sites (carve record of a go test, or of a C program by the carve or heaptrack recorder, gives them)", r.Site, name)
	}
	return fmt.Errorf("no site %q in %s%s", r.Site, name, didYouMean(r.Site, sites))
}

// nearSizes names the request sizes of the trace nearest to size.
func (sc scanned) nearSizes(size int) string {
	sizes := make([]uint64, 0, len(sc.sizes))
	for s := range sc.sizes {
		sizes = append(sizes, s)
	}
	if len(sizes) == 0 {
		return ""
	}
	dist := func(s uint64) uint64 {
		if s > uint64(size) {
			return s - uint64(size)
		}
		return uint64(size) - s
	}
	slices.SortFunc(sizes, func(a, b uint64) int { return cmp.Or(cmp.Compare(dist(a), dist(b)), cmp.Compare(a, b)) })
	var near []string
	for _, s := range sizes[:min(3, len(sizes))] {
		near = append(near, strconv.FormatUint(s, 10))
	}
	return "; the nearest it has: " + strings.Join(near, ", ")
}

// sizesOf passes a source's events through, keeping the sizes of its
// requests (allocations and reallocs) when sizes is not nil.
type sizesOf struct {
	trace.Source
	sizes map[uint64]bool
}

func (s *sizesOf) Read(dst []trace.Event) (int, error) {
	n, err := s.Source.Read(dst)
	if s.sizes != nil {
		for _, e := range dst[:n] {
			if e.Op != trace.Free {
				s.sizes[e.Size] = true
			}
		}
	}
	return n, err
}

// Labels passes the source's label table through (trace.LabeledSource).
func (s *sizesOf) Labels() *trace.Labels { return trace.LabelsOf(s.Source) }

// didYouMean returns "; did you mean X?" for the names nearest to name,
// or "".
func didYouMean(name string, names []string) string {
	near := text.Closest(name, names, 3)
	if len(near) == 0 {
		return ""
	}
	return "; did you mean " + text.Or(near) + "?"
}
