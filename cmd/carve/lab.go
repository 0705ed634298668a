package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/traces"
)

// The lab on its embedded defaults, what carve runs with no arguments: the
// paper's method (one trace, many allocators, how far each heap grows
// beyond live memory) on the real traces shipped in the binary, and the
// block-allocator article's scenarios, each through every allocator and, for the scenarios,
// every allocator behind a pool for the 1 KiB buffers: the block-allocator article's question
// "would a pool for these objects have helped?".

// labPool is the request size the scenarios' pool rows put in a pool: the
// article's scratch buffers.
const labPool = 1024

// labScenarios are the article's scenarios the lab replays, with n set by
// --n: the connection scenario with follow-up buffers too large for the
// holes, and the carving scenario with small objects between the waves.
func labScenarios(n int) []struct {
	gen  string
	args trace.Args
} {
	return []struct {
		gen  string
		args trace.Args
	}{
		{"connection", trace.Args{"n": float64(n), "next": 4096}},
		{"carving", trace.Args{"n": float64(n), "smalls": 1}},
	}
}

// cmdLab runs the lab: carve lab [flags], or carve alone.
func cmdLab(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("lab", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f replayFlags
	f.register(fs)
	n := fs.Int("n", 10000, "connections in the block-allocator article's scenarios (the article uses 100000; first and next fit then take minutes)")
	if err := fs.Parse(args); err != nil {
		return badUsage("carve lab: %v", err)
	}
	if fs.NArg() > 0 {
		return badUsage("carve lab: unexpected argument %q (carve replay takes traces)", fs.Arg(0))
	}
	if *n < 1 || *n > 1e7 {
		return badUsage("carve lab: --n %d: want 1 to 10000000", *n)
	}
	if len(f.pools) > 0 {
		return badUsage("carve lab: --pool: the lab's scenarios have their pool rows (%d B); carve replay takes --pool", labPool)
	}
	base, err := f.config("lab")
	if err != nil {
		return err
	}

	// The shipped traces, one row per allocator.
	shipped := base
	for _, t := range traces.All() {
		s, err := traces.Resolve(t.Name)
		if err != nil {
			return err
		}
		shipped.sources = append(shipped.sources, s)
	}
	// The scenarios, one row per allocator and one per allocator behind
	// the pool.
	scen := base
	scen.allocs = nil
	for _, a := range base.allocs {
		scen.allocs = append(scen.allocs, allocSpec{name: a.name})
	}
	for _, a := range base.allocs {
		if _, real := realMallocs[a.name]; !real {
			scen.allocs = append(scen.allocs, allocSpec{name: a.name, pools: []int{labPool}})
		}
	}
	for _, sc := range labScenarios(*n) {
		s, err := traces.Resolve(traces.Gen(sc.gen, sc.args))
		if err != nil {
			return err
		}
		scen.sources = append(scen.sources, s)
	}

	if f.format == "text" {
		fmt.Fprintf(stdout, "carve lab: each trace through each allocator; peak fp/live is how far the heap grew beyond live memory (1.000: not at all)\n\n")
	}
	var prog *progress
	if f.progress {
		prog = startProgress(stderr, shipped.replays()+scen.replays())
	}
	tables := append(shipped.run(prog), scen.run(prog)...)
	prog.stop()
	err = emit(tables, &f, stdout)
	if f.format == "text" {
		fmt.Fprint(stdout, `More: carve report -o report.html aosp-systemui (these tables as charts over time, with maps of the heaps);
      carve scenario connection --next 4096 (the block-allocator article's experiments, in its words, on every malloc);
      carve advise aosp-systemui (which pools would lower the peak, measured); carve help (all commands).
`)
	}
	return err
}
