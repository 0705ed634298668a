package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"unsafe"

	"github.com/carvelab/carve/lab/traces"

	"github.com/carvelab/carve/lab/libc"
	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/pool"
)

// The block-allocator article's experiments, command by command: each prints one line per
// allocator in the article's wording, beginning with the allocator's name and
// a colon. The real mallocs run in child processes and are measured by
// their anonymous RSS above the child's baseline, as the article measured
// glibc; carve's heaps run here and report the resident bytes of their
// own memory (mincore) and their footprint. Every byte of every block is
// written, as the article's programs write theirs.

const scenarioUsage = `carve scenario connection [--next 1024|4096] [--n N] [--alloc LIST]
carve scenario carving [--from malloc|pool] [--smalls 0|1] [--n N] [--alloc LIST]
carve scenario stride [--alloc LIST]
carve scenario pool
carve scenario bump [--n N] [--alloc LIST]`

// cmdScenario runs one of the block-allocator article's experiments: carve scenario NAME [flags].
func cmdScenario(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return badUsage("carve scenario: want one of connection, carving, stride, pool, bump:\n%s", scenarioUsage)
	}
	name, args := args[0], args[1:]
	fs := flag.NewFlagSet("scenario "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	alloc := fs.String("alloc", "all", "comma-separated `LIST` of allocators, or all")
	n := fs.Int("n", 100000, "connections (connection, carving) or objects (bump, default 5000000)")
	next := fs.Int("next", 4096, "size of the new buffers (connection)")
	from := fs.String("from", "malloc", "where the scratch buffers come from: malloc or pool (carving)")
	smalls := fs.Int("smalls", 1, "1 to allocate the small objects between the waves, 0 not to (carving)")
	jobs := fs.Int("jobs", 2, "allocators measured at once")
	if err := fs.Parse(args); err != nil {
		return badUsage("carve scenario %s: %v", name, err)
	}
	if fs.NArg() > 0 {
		return badUsage("carve scenario %s: unexpected argument %q", name, fs.Arg(0))
	}
	nSet := false
	fs.Visit(func(f *flag.Flag) { nSet = nSet || f.Name == "n" })
	if name == "bump" && !nSet {
		*n = 5000000 // the benchmark of the post "Bump Allocator"
	}
	if *n < 1 || *n > 1e8 || *next < 0 || *jobs < 1 || *smalls != 0 && *smalls != 1 || *from != "malloc" && *from != "pool" {
		return badUsage("carve scenario %s: want --n from 1, --next >= 0, --smalls 0 or 1, --from malloc or pool, --jobs >= 1", name)
	}
	names, err := allocNames("scenario", *alloc)
	if err != nil {
		return err
	}
	c := replayConfig{jobs: *jobs, noCheck: true, touch: true}
	for _, a := range names {
		c.allocs = append(c.allocs, allocSpec{name: a})
	}
	switch name {
	case "connection":
		return scenarioPhases(c, "connection", trace.Args{"n": float64(*n), "next": float64(*next)}, stdout,
			func(r row) string {
				setup, freed, end := r.Phases[0], r.Phases[1], r.Phases[2]
				return fmt.Sprintf("next buffers of %d B: RSS after setup %d KB, after freeing scratch %d KB, after %d new buffers %d KB (grew %d KB, %d MB); footprint grew %d KB",
					*next, kb(setup.Resident), kb(freed.Resident), *n, kb(end.Resident),
					kb(end.Resident-freed.Resident), (end.Resident-freed.Resident)/(1<<20), kb(end.Footprint-freed.Footprint))
			})
	case "carving":
		if *from == "pool" {
			for i := range c.allocs {
				c.allocs[i].pools = []int{1024}
			}
		}
		return scenarioPhases(c, "carving", trace.Args{"n": float64(*n), "smalls": float64(*smalls)}, stdout,
			func(r row) string {
				freed, smallsEnd, end := r.Phases[1], r.Phases[1], r.Phases[len(r.Phases)-1]
				if len(r.Phases) == 4 {
					smallsEnd = r.Phases[2]
				}
				wave := end.Resident - smallsEnd.Resident
				return fmt.Sprintf("carving %s smalls=%d | after freeing scratch %d KB | after smalls %d KB (%+d) | after 2nd wave of 1 KB %d KB (%+d KB = %d MB)",
					*from, *smalls, kb(freed.Resident), kb(smallsEnd.Resident), kb(smallsEnd.Resident-freed.Resident),
					kb(end.Resident), kb(wave), wave/(1<<20))
			})
	case "stride":
		return scenarioStride(names, stdout)
	case "pool":
		if err := demoFourChunks(prefixed{stdout, "pool: "}, demoConfig{}); err != nil {
			return err
		}
		return demoStride(prefixed{stdout, "pool: "}, demoConfig{})
	case "bump":
		if err := demoArena(prefixed{stdout, "arena: "}, demoConfig{persons: *n}); err != nil {
			return err
		}
		c.touch, c.untouched = false, true // the post's benchmark times the calls, not the writes
		return scenarioPhases(c, "bump", trace.Args{"n": float64(*n)}, stdout, func(r row) string {
			return fmt.Sprintf("%d Person (36 B) allocated and freed: %.1f ms in the allocator (%.1f ns per call)",
				*n, r.NsPerOp*float64(r.Ops)/1e6, r.NsPerOp)
		})
	}
	return badUsage("carve scenario: unknown scenario %q (want connection, carving, stride, pool, bump)", name)
}

// scenarioPhases replays a generated scenario through every allocator of
// c and prints a line per allocator, written by line from its row.
func scenarioPhases(c replayConfig, gen string, args trace.Args, w io.Writer, line func(row) string) error {
	s, err := traces.Resolve(traces.Gen(gen, args))
	if err != nil {
		return badUsage("carve scenario %s: %v", gen, err)
	}
	c.sources = []traces.Trace{s}
	var failed error
	for _, r := range c.run(nil)[0].rows {
		switch {
		case r.Error != "":
			fmt.Fprintf(w, "%s: %s\n", r.Allocator, r.Error)
			if r.ErrorKind == kindCheck || r.ErrorKind == kindInput {
				failed = checkFailed{fmt.Errorf("%s: %s", r.Allocator, r.Error)}
			}
		case len(r.Phases) < 2 && gen != "bump":
			fmt.Fprintf(w, "%s: the replay reached %d of the scenario's phases\n", r.Allocator, len(r.Phases))
		default:
			fmt.Fprintf(w, "%s: %s\n", r.Allocator, line(r))
		}
	}
	return failed
}

// prefixed starts every line written to w with a prefix, unless it
// starts with it already.
type prefixed struct {
	w      io.Writer
	prefix string
}

func (p prefixed) Write(b []byte) (int, error) {
	lines := strings.SplitAfter(string(b), "\n")
	for _, l := range lines {
		if l == "" {
			continue
		}
		if !strings.HasPrefix(l, p.prefix) {
			l = p.prefix + l
		}
		if _, err := io.WriteString(p.w, l); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

// strideResult is what a stride measurement reports.
type strideResult struct {
	Apart  int64  `json:"apart"`
	Usable int    `json:"usable"`
	Error  string `json:"error,omitempty"`
}

// scenarioStride allocates 16 bytes twice from each allocator and prints
// how far apart the two blocks are and how many bytes the first can hold:
// the article's per-block bookkeeping.
func scenarioStride(names []string, w io.Writer) error {
	if p, err := pool.New(16); err == nil {
		a, _ := p.Alloc()
		b, _ := p.Alloc()
		fmt.Fprintf(w, "pool: pool(16) twice: %d bytes apart, %d usable\n", addrOf(b)-addrOf(a), cap(a))
		p.Close()
	}
	for _, name := range names {
		var r strideResult
		if spec := (allocSpec{name: name}); spec.inChild() && name != "go" {
			r = strideInChild(spec)
		} else {
			r = strideHere(name)
		}
		if r.Error != "" {
			fmt.Fprintf(w, "%s: %s\n", name, r.Error)
			continue
		}
		fmt.Fprintf(w, "%s: malloc(16) twice: %d bytes apart, %d usable\n", name, r.Apart, r.Usable)
	}
	return nil
}

// kb converts bytes to KB, rounding toward zero.
func kb(n int64) int64 { return n / 1024 }

func addrOf(b []byte) int64 { return int64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// strideHere measures one of carve's heaps, or the Go heap.
func strideHere(name string) strideResult {
	a, err := replay.New(name)
	if err != nil {
		return strideResult{Error: err.Error()}
	}
	defer a.Close()
	x, err1 := a.Alloc(16, 0)
	y, err2 := a.Alloc(16, 0)
	if err1 != nil || err2 != nil {
		return strideResult{Error: fmt.Sprint(err1, err2)}
	}
	usable := cap(x)
	if u, ok := a.(interface{ UsableSize([]byte) (int, error) }); ok {
		if n, err := u.UsableSize(x); err == nil {
			usable = n
		}
	}
	return strideResult{Apart: addrOf(y) - addrOf(x), Usable: usable}
}

// strideInChild measures a real malloc in a child with its library
// preloaded.
func strideInChild(spec allocSpec) strideResult {
	if err := spec.available(); err != nil {
		return strideResult{Error: err.Error()}
	}
	cmd, err := spec.child("--stride", "--alloc", spec.name)
	if err != nil {
		return strideResult{Error: err.Error()}
	}
	out, err := cmd.Output()
	var r strideResult
	if jerr := json.Unmarshal(out, &r); jerr != nil {
		return strideResult{Error: fmt.Sprintf("child: %v %v", err, jerr)}
	}
	return r
}

// strideChild is the child's side of the stride measurement.
func strideChild(name string, w io.Writer) error {
	r := strideResult{}
	if got := libc.Active(); got.Name != name {
		r.Error = fmt.Sprintf("asked for %s but %s serves this process: no figure", name, got.Name)
	} else {
		// This process has allocated before (the C runtime, cgo): a free
		// chunk may sit anywhere in the heap. Of 256 requests, most come
		// back to back from fresh memory: the stride is the distance most
		// consecutive pairs share.
		ps := make([]unsafe.Pointer, 0, 256)
		for range cap(ps) {
			p, err := libc.Malloc(16)
			if err != nil {
				r.Error = err.Error()
				break
			}
			ps = append(ps, p)
		}
		if r.Error == "" {
			apart := map[int64]int{}
			for i := 1; i < len(ps); i++ {
				apart[int64(uintptr(ps[i]))-int64(uintptr(ps[i-1]))]++
			}
			for d, k := range apart {
				if k > apart[r.Apart] {
					r.Apart = d
				}
			}
			r.Usable = libc.UsableSize(ps[len(ps)-1])
		}
		for _, p := range ps {
			libc.Free(p)
		}
	}
	return json.NewEncoder(w).Encode(r)
}
