package record

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/carvelab/carve/lab/trace"
)

// Sites: where a Go test's objects were allocated. The execution trace
// gives each object its type and size but no call stack; the heap
// profile go test writes beside it (-memprofile, with -memprofilerate=1:
// every allocation profiled) gives each call stack the objects and bytes
// it allocated, per size, but no time, type or address. The two are
// joined by size, the one thing both know (both size an object by its
// span's class), where the profile counts at least MinSiteCover of the
// trace's objects of the size: a size whose profiled allocations all
// come from one site gives that site to every object of that size; a
// size of several sites gives each of its objects one of them by share,
// the object's ID drawing it (deterministically: the same trace gives
// the same sites), and says so (AttrSiteByShare).
// Allocations made before the testing package sets the rate (package
// initialisation) are profiled at the runtime's default rate, one in
// 512 KiB: their sites are samples, not counts.

// A site is a call stack reduced to the frame that matters: the
// innermost frame of the program's own code (a package outside the
// standard library), inlined frames counted, the runtime's dropped, shown
// as "function (file.go:line)"; where no frame is the program's, the
// innermost frame outside the runtime.

// A size gives its one site to the trace's objects of that size only
// when the profile counts them all: at least MinSiteCover of the
// trace's allocations of that size (objects allocated before the rate
// was set, or alive when the trace started, are not the site's).
const MinSiteCover = 0.9

// Sites is the allocation sites of a heap profile, by object size.
type Sites struct {
	bySize map[uint64][]SiteShare
	// covered are the sizes whose one site counts at least MinSiteCover
	// of the trace's objects of that size (cover); nil until then.
	covered map[uint64]bool
	// Sampled says the profile sampled the allocations (a service's,
	// at its own rate): every site is a share, never a count.
	Sampled bool
	// Objects and Bytes are every profiled allocation's; OneSite the
	// bytes of those whose size has one site (and the trace's objects of
	// that size counted: cover).
	Objects, Bytes, OneSite int64
}

// SiteShare is one site's allocations of one size.
type SiteShare struct {
	Site           string
	Objects, Bytes int64
}

// Of returns the site of the object id of size bytes, and whether it
// was drawn by share, as the size has several; "" when the profile does
// not count the trace's objects of that size.
func (s *Sites) Of(size, id uint64) (site string, byShare bool) {
	if s == nil || s.covered != nil && !s.covered[size] {
		return "", false
	}
	ss := s.bySize[size]
	switch {
	case len(ss) == 0:
		return "", false
	case len(ss) == 1:
		return ss[0].Site, s.Sampled
	}
	var total int64
	for _, sh := range ss {
		total += sh.Objects
	}
	// The ID's hash, a point in [0, total): its site's share holds it.
	x := id * 0x9E3779B97F4A7C15
	x ^= x >> 29
	at := int64(x % uint64(total))
	for _, sh := range ss {
		if at < sh.Objects {
			return sh.Site, true
		}
		at -= sh.Objects
	}
	return ss[len(ss)-1].Site, true
}

// cover checks the profile against the trace's allocations of each size
// (traced): a size keeps its one site if the profile counts at least
// MinSiteCover of them.
func (s *Sites) cover(traced map[uint64]int64) {
	s.covered = map[uint64]bool{}
	s.OneSite = 0
	for size, ss := range s.bySize {
		var n int64
		for _, sh := range ss {
			n += sh.Objects
		}
		if float64(n) >= MinSiteCover*float64(traced[size]) {
			s.covered[size] = true
			if len(ss) == 1 {
				s.OneSite += ss[0].Bytes
			}
		}
	}
}

// Shares returns the sites of the objects of size bytes, the most bytes
// first.
func (s *Sites) Shares(size uint64) []SiteShare {
	if s == nil {
		return nil
	}
	return s.bySize[size]
}

// readSites reads the heap profile at path (a go test -memprofile),
// std being the standard library's packages.
func readSites(path string, std map[string]bool) (*Sites, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return sitesOf(p, nil, std, path)
}

// sitesOf returns the sites of heap profile p's allocations, less those
// of before (an earlier profile of the same process, or nil): the
// allocations between the two. name is p's in errors.
func sitesOf(p, before *profile.Profile, std map[string]bool, name string) (*Sites, error) {
	objects, space := -1, -1
	for i, st := range p.SampleType {
		switch st.Type {
		case "alloc_objects":
			objects = i
		case "alloc_space":
			space = i
		}
	}
	if objects < 0 || space < 0 {
		return nil, fmt.Errorf("%s: not a heap profile (no alloc_objects and alloc_space)", name)
	}
	type key struct {
		size uint64
		site string
	}
	counts := map[key]*SiteShare{}
	// add counts the allocations of prof's samples, sign times.
	add := func(prof *profile.Profile, sign int64) {
		for _, smp := range prof.Sample {
			if objects >= len(smp.Value) || space >= len(smp.Value) {
				continue
			}
			n, b := smp.Value[objects], smp.Value[space]
			if n <= 0 {
				continue
			}
			size := uint64(b / n)
			if v := smp.NumLabel["bytes"]; len(v) > 0 && v[0] > 0 {
				size = uint64(v[0])
			}
			k := key{size, siteOf(smp.Location, std)}
			c := counts[k]
			if c == nil {
				c = &SiteShare{Site: k.site}
				counts[k] = c
			}
			c.Objects += sign * n
			c.Bytes += sign * b
		}
	}
	add(p, 1)
	if before != nil {
		add(before, -1)
	}
	s := &Sites{bySize: map[uint64][]SiteShare{}}
	for k, c := range counts {
		if c.Objects <= 0 || c.Bytes <= 0 {
			delete(counts, k)
			continue
		}
		s.Objects += c.Objects
		s.Bytes += c.Bytes
	}
	for k, c := range counts {
		s.bySize[k.size] = append(s.bySize[k.size], *c)
	}
	for size, ss := range s.bySize {
		slices.SortFunc(ss, func(a, b SiteShare) int { return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), cmp.Compare(a.Site, b.Site)) })
		s.bySize[size] = ss
		if len(ss) == 1 {
			s.OneSite += ss[0].Bytes
		}
	}
	return s, nil
}

// siteOf reduces a call stack, innermost location first, to its site.
func siteOf(stack []*profile.Location, std map[string]bool) string {
	first := ""
	for _, loc := range stack {
		// A location's lines are its inlined frames, the innermost first.
		for _, ln := range loc.Line {
			if ln.Function == nil {
				continue
			}
			pkg := funcPackage(ln.Function.Name)
			if pkg == "runtime" || strings.HasPrefix(pkg, "runtime/") || strings.HasPrefix(pkg, "internal/") {
				continue
			}
			// The function without its package's path: main.(*Cache).Set.
			name := ln.Function.Name[strings.LastIndexByte(ln.Function.Name, '/')+1:]
			s := fmt.Sprintf("%s (%s:%d)", name, filepath.Base(ln.Function.Filename), ln.Line)
			if !std[pkg] {
				return s
			}
			if first == "" {
				first = s
			}
		}
	}
	return first
}

// funcPackage returns the package path of a function as a profile names
// it: "main" of main.f, "github.com/a/b" of github.com/a/b.(*T).M.
func funcPackage(name string) string {
	slash := strings.LastIndexByte(name, '/')
	if i := strings.IndexByte(name[slash+1:], '.'); i >= 0 {
		return name[:slash+1+i]
	}
	return name
}

// stdPackages lists the standard library's packages (go list std), or
// none if the go command cannot say.
func stdPackages(ctx context.Context, env []string) map[string]bool {
	cmd := exec.CommandContext(ctx, "go", "list", "std")
	cmd.Env = env
	out, err := cmd.Output()
	std := map[string]bool{}
	if err != nil {
		return std
	}
	for _, p := range strings.Fields(string(out)) {
		std[p] = true
	}
	return std
}

// tracedSizes reads the Go execution trace at path as the converter
// does and counts its allocations of each size: what the heap profile's
// counts are checked against (Sites.cover).
func tracedSizes(path string, opt Options) (map[uint64]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := trace.NewReaderOptions(f, path, trace.ReaderOptions{Format: trace.Go, MaxGoGeneration: opt.MaxGoGeneration})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	counts := map[uint64]int64{}
	batch := make([]trace.Event, 4096)
	for {
		n, err := r.Read(batch)
		for _, e := range batch[:n] {
			if e.Op == trace.Alloc {
				counts[e.Size]++
			}
		}
		if err == io.EOF {
			return counts, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
