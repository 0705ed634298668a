// Package scenario runs the block-allocator article's experiments (and
// the benchmark of the post "Bump Allocator") on every allocator, and
// prints one line per allocator in the sources' wording, beginning with
// the allocator's name and a colon: what carve scenario prints (its
// figures in MB to fit text.Width, unless Config.Wide).
// Scenarios is the table of them, which carve scenario's synopsis, help
// and dispatch read (carve help scenario lists them). Demo runs the pool
// and arena demonstrations of carve demo. See package lab for the
// lab's overview and the carve package for the sources.
//
// The real mallocs run in child processes (package rows) and are measured
// by their anonymous RSS above the child's baseline, as the article
// measured glibc; carve's heaps run here and report the resident bytes of
// their own memory (mincore) and their footprint. Every byte of every
// block is written, as the article's programs write theirs.
package scenario

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"unsafe"

	"github.com/carvelab/carve/internal/text"
	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/rows"
	"github.com/carvelab/carve/lab/trace/gen"
	"github.com/carvelab/carve/lab/traces"
	"github.com/carvelab/carve/pool"
)

// A Scenario is one of the experiments carve scenario runs. The
// command's synopsis, its help, its dispatch and the flags it takes of
// each scenario are read from Scenarios.
type Scenario struct {
	Name string
	// Doc says in one sentence what the scenario does, naming the flags
	// it reads (carve help scenario prints it beside the name).
	Doc string
	// Run runs the scenario and prints its lines to w.
	Run func(w io.Writer, c Config) error
	// Count is what Config.N counts ("connections"), and N its default:
	// the sources' own size. A scenario that reads no N has neither.
	Count string
	N     int
	// Flags are the other flags of carve scenario that only some
	// scenarios read, those this one reads: "next" (Config.Next), "from"
	// (Config.FromPool), "smalls" (Config.Smalls).
	Flags []string
}

// Scenarios are the scenarios, in the order help lists them.
var Scenarios = []Scenario{
	{Name: "connection", Run: Connection, Count: "connections", N: DefaultDemo.Connections, Flags: []string{"next"},
		Doc: "--n connections, each a 1 KiB scratch buffer and a 64-byte session; the scratch buffers freed; " +
			"--n new buffers of --next bytes (1024: they fit the holes; 4096: they cannot)"},
	{Name: "carving", Run: Carving, Count: "connections", N: DefaultDemo.Connections, Flags: []string{"from", "smalls"},
		Doc: "the connection setup (--n connections), the scratch freed, small objects settling into the holes " +
			"(--smalls 1), then a second wave of 1 KiB buffers; --from pool puts the buffers in a carve pool"},
	{Name: "stride", Run: Stride,
		Doc: fmt.Sprintf("how far apart malloc(16)s land (the gap most of %d share with their neighbours), and how many bytes each holds", rows.StrideBlocks)},
	{Name: "pool", Run: func(w io.Writer, _ Config) error { return Pool(w) },
		Doc: "the article's pool.cpp: four chunks, a fifth refused, a freed chunk reused"},
	{Name: "bump", Run: Bump, Count: "objects", N: DefaultDemo.Persons,
		Doc: `--n Person values through carve's arena and every allocator (the post "Bump Allocator")`},
}

// Names are the scenarios' names, in the order of Scenarios.
var Names = func() []string {
	var names []string
	for _, s := range Scenarios {
		names = append(names, s.Name)
	}
	return names
}()

// Lookup returns the scenario called name.
func Lookup(name string) (Scenario, bool) {
	for _, s := range Scenarios {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// Reads reports whether the scenario reads the flag (n, next, from or
// smalls; see Scenario.Flags).
func (s Scenario) Reads(flag string) bool {
	if flag == "n" {
		return s.N > 0
	}
	return slices.Contains(s.Flags, flag)
}

// Config says what a scenario runs and at what size.
type Config struct {
	// Allocs are the allocators measured (rows.Names by default).
	Allocs []string
	// N is the number of what the scenario counts (its Scenario.Count).
	N int
	// Next is the size of the connection scenario's new buffers.
	Next int
	// FromPool puts the carving scenario's scratch buffers in a carve pool
	// in front of each allocator; Smalls (0 or 1) allocates its small
	// objects between the waves.
	FromPool bool
	Smalls   int
	// Jobs is how many allocators are measured at once.
	Jobs int
	// Wide prints each line in full, however long: the article's wording
	// with every figure in KB, and the figures it does not give. Without
	// it a line fits text.Width characters, its figures in MB (and the
	// lines before them say so).
	Wide bool
	// MaxRequest and MaxRSS are the rows' budgets (rows.Options): a
	// request above MaxRequest is skipped, and the line says so.
	MaxRequest, MaxRSS int64
	// Progress, when not nil, counts the replays (see rows.Run).
	Progress *rows.Progress
}

// options are the rows' options: every byte written with touch.
func (c Config) options(touch bool) rows.Options {
	return rows.Options{NoCheck: true, Touch: touch, MaxRequest: c.MaxRequest, MaxRSS: c.MaxRSS}
}

func (c Config) specs() []rows.Spec {
	names := c.Allocs
	if names == nil {
		names = rows.Names()
	}
	var specs []rows.Spec
	for _, a := range names {
		specs = append(specs, rows.Spec{Alloc: a})
	}
	return specs
}

// Connection runs the article's connection scenario: n connections, each
// a 1 KiB scratch buffer and a 64-byte session; the scratch buffers freed;
// n new buffers of c.Next bytes. It prints what RSS did in each phase;
// what the new buffers grew it by is counted from the most it was before
// them (rows.Row.ResidentGrowth), so that a heap that gave the scratch
// buffers' pages back and takes them again has not grown.
func Connection(w io.Writer, c Config) error {
	head := fmt.Sprintf("%d connections, new buffers of %d B", c.N, c.Next)
	return phases(w, c.specs(), c.options(true), c, "connection", gen.Args{"n": float64(c.N), "next": float64(c.Next)}, head,
		func(r rows.Row) string {
			setup, freed, end := r.Phases[0], r.Phases[1], r.Phases[2]
			grew, _ := r.ResidentGrowth()
			if !c.Wide {
				return fmt.Sprintf("RSS after setup %s, after freeing scratch %s, after new buffers %s (grew %s)",
					mib(setup.Resident), mib(freed.Resident), mib(end.Resident), mib(grew))
			}
			_, fpGrew, _ := r.Growth()
			return fmt.Sprintf("next buffers of %d B: RSS after setup %d KB, after freeing scratch %d KB, after %d new buffers %d KB (grew %d KB, %s MB); footprint grew %d KB; RSS beyond live at the end %d KB",
				c.Next, kb(setup.Resident), kb(freed.Resident), c.N, kb(end.Resident),
				kb(grew), mib(grew), kb(fpGrew), kb(end.Resident-end.Live))
		})
}

// Carving runs the article's carving scenario: the connection setup, the
// scratch buffers freed, small objects (with Smalls) settling into the
// holes, then a second wave of 1 KiB buffers. What the wave grew RSS by
// is counted from the most it was before (rows.Row.ResidentGrowth).
func Carving(w io.Writer, c Config) error {
	specs := c.specs()
	from := "malloc"
	if c.FromPool {
		from = "pool"
		for i := range specs {
			specs[i].Routes = replay.SizePools(1024)
		}
	}
	head := fmt.Sprintf("carving %s smalls=%d, %d connections", from, c.Smalls, c.N)
	return phases(w, specs, c.options(true), c, "carving", gen.Args{"n": float64(c.N), "smalls": float64(c.Smalls)}, head,
		func(r rows.Row) string {
			freed, smallsEnd, end := r.Phases[1], r.Phases[1], r.Phases[len(r.Phases)-1]
			if len(r.Phases) == 4 {
				smallsEnd = r.Phases[2]
			}
			wave, _ := r.ResidentGrowth()
			if !c.Wide {
				return fmt.Sprintf("after freeing scratch %s, smalls %s (%s), 2nd wave of 1 KB %s (%s)",
					mib(freed.Resident), mib(smallsEnd.Resident), signed(smallsEnd.Resident-freed.Resident),
					mib(end.Resident), signed(wave))
			}
			return fmt.Sprintf("carving %s smalls=%d | after freeing scratch %d KB | after smalls %d KB (%+d KB) | after 2nd wave of 1 KB %d KB (%+d KB = %s MB) | RSS beyond live at the end %d KB",
				from, c.Smalls, kb(freed.Resident), kb(smallsEnd.Resident), kb(smallsEnd.Resident-freed.Resident),
				kb(end.Resident), kb(wave), mib(wave), kb(end.Resident-end.Live))
		})
}

// Bump runs the arena demonstration and the bump benchmark of the post
// "Bump Allocator" through every allocator: N Person values allocated and
// freed, the time in the allocator.
func Bump(w io.Writer, c Config) error {
	if err := demoArena(prefixed{w, "arena: "}, DemoConfig{Persons: c.N}); err != nil {
		return err
	}
	// The post's benchmark times the calls, not the writes.
	return phases(w, c.specs(), c.options(false), c, "bump", gen.Args{"n": float64(c.N)}, "", func(r rows.Row) string {
		return fmt.Sprintf("%d Person (36 B) allocated and freed: %.1f ms in the allocator (%.1f ns per call)",
			c.N, r.NsPerOp*float64(r.Ops)/1e6, r.NsPerOp)
	})
}

// Pool runs the article's pool.cpp and the stride of a pool's chunks.
func Pool(w io.Writer) error {
	if err := demoFourChunks(prefixed{w, "pool: "}, DemoConfig{}); err != nil {
		return err
	}
	return demoStride(prefixed{w, "pool: "}, DemoConfig{})
}

// phases replays a generated scenario through every spec and prints a
// line per allocator, written by line from its row, after the trace's
// description and head, the scenario's parameters (none if ""), to which
// it adds the unit of the short lines. A row that failed a check or could
// not read its trace makes the error returned.
func phases(w io.Writer, specs []rows.Spec, o rows.Options, c Config, gen string, args gen.Args, head string, line func(rows.Row) string) error {
	t, err := traces.Resolve(traces.Gen(gen, args))
	if err != nil {
		return err
	}
	for _, l := range text.Wrap(t.About, text.Width-2) {
		fmt.Fprintf(w, "# %s\n", l)
	}
	switch {
	case head != "" && c.Wide:
		fmt.Fprintf(w, "# %s\n", head)
	case head != "":
		fmt.Fprintf(w, "# %s; RSS in MB (--wide: in KB, with more figures)\n", head)
	}
	var failed error
	table := rows.Run([]traces.Trace{t}, specs, o, c.Jobs, c.Progress)[0]
	defer func() {
		for i, f := range table.Findings() {
			first := "#          "
			if i == 0 {
				first = "# verdict: "
			}
			width := text.Width
			if c.Wide {
				width = 0
			}
			for _, l := range text.Hang(first, "#            ", strings.Fields(f), width) {
				fmt.Fprintln(w, l)
			}
		}
	}()
	for _, r := range table.Rows {
		switch {
		case r.Error != "":
			fmt.Fprintf(w, "%s: %s\n", r.Allocator, r.Error)
			if r.ErrorKind == rows.KindCheck || r.ErrorKind == rows.KindInput {
				failed = r.Err()
			}
		case len(r.Phases) < 2 && gen != "bump":
			fmt.Fprintf(w, "%s: the replay reached %d of the scenario's phases\n", r.Allocator, len(r.Phases))
		case r.TraceErrors > 0:
			// The figures leave out what the replay skipped: say so, or a
			// buffer never allocated reads as one that cost nothing.
			fmt.Fprintf(w, "%s: %s; but %d of the scenario's requests were skipped, not allocated, and the figures leave them out: %s\n",
				r.Allocator, line(r), r.TraceErrors, r.FirstTraceError)
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

// Stride allocates 16 bytes rows.StrideBlocks times from each allocator and prints how
// far apart the blocks land (rows.Stride: the gap most of them share with
// their neighbours, which two consecutive calls show where an allocator
// hands blocks out one after the other) and how many bytes one can hold:
// the article's per-block bookkeeping. A carve pool of 16-byte chunks
// comes first.
func Stride(w io.Writer, c Config) error {
	if p, err := pool.New(16); err == nil {
		a, _ := p.Alloc()
		b, _ := p.Alloc()
		fmt.Fprintf(w, "pool: pool(16) twice: %d bytes apart, %d usable\n", addrOf(b)-addrOf(a), cap(a))
		p.Close()
	}
	for _, s := range c.specs() {
		r := rows.Stride(s.Alloc)
		if r.Error != "" {
			fmt.Fprintf(w, "%s: %s\n", s.Alloc, r.Error)
			continue
		}
		fmt.Fprintf(w, "%s: malloc(16), %d times: %d bytes apart, %d usable\n", s.Alloc, rows.StrideBlocks, r.Apart, r.Usable)
	}
	return nil
}

// kb converts bytes to KB (the article's unit, 1024 bytes), rounding
// toward zero.
func kb(n int64) int64 { return n / 1024 }

// signed writes a change of bytes in MB, as mib does, with its sign.
func signed(n int64) string {
	if n < 0 {
		return mib(n)
	}
	return "+" + mib(n)
}

// mib writes bytes in MB (2^20 bytes, as the article counts them): whole
// ones from 10 on, one decimal below, so that a small change does not read
// as "0 MB".
func mib(n int64) string {
	v := float64(n) / (1 << 20)
	if v >= 10 || v <= -10 {
		return fmt.Sprintf("%.0f", math.Trunc(v))
	}
	return fmt.Sprintf("%.1f", v)
}

func addrOf(b []byte) int64 { return int64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }
