package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/rows"
	"github.com/carvelab/carve/lab/trace/gen"
	"github.com/carvelab/carve/lab/traces"
)

// The lab on its embedded defaults, what carve runs with no arguments: the
// FREENIX paper's method (one trace, many allocators, how far each heap
// grows beyond live memory) on the real traces shipped in the binary, and
// the block-allocator article's scenarios, each through every allocator
// and, for the scenarios, every allocator behind a pool for the 1 KiB
// buffers: the article's question "would a pool for these objects have
// helped?".

// maxN bounds --n, the connections of the article's scenarios (carve lab,
// carve scenario) or the objects of the bump benchmark: ten times the
// article's 100,000 connections is a trace of 30 million events and
// 11 GB of live memory.
const maxN = 10_000_000

// labPool is the request size the scenarios' pool rows put in a pool: the
// article's scratch buffers.
const labPool = 1024

// labScenarios are the article's scenarios the lab replays, with n
// connections: the connection scenario with follow-up buffers too large
// for the holes, and the carving scenario with small objects between the
// waves.
func labScenarios(n int) []string {
	return []string{
		traces.Gen("connection", gen.Args{"n": float64(n), "next": 4096}),
		traces.Gen("carving", gen.Args{"n": float64(n), "smalls": 1}),
	}
}

var labCommand = &command{
	name: "lab", args: "[flags]",
	short: "the lab on its embedded defaults: the shipped trace and the article's scenarios through every allocator",
	long: `The shipped traces (below) and the block-allocator article's connection
and carving scenarios, each replayed through every allocator and, for the
scenarios, every allocator behind a pool for the 1 KiB buffers. It is what
carve runs with no arguments. The flags are carve replay's, and --n.

` + shippedHelp(),
	setup: func(fs *flag.FlagSet) func(*cli, []string) error {
		var f replayFlags
		f.register(fs)
		n := fs.Int("n", 10000, "connections in the article's scenarios (the article uses 100000: about a minute on two cores)")
		return func(c *cli, args []string) error {
			if len(args) > 0 {
				return badUsage("unexpected argument %q (carve replay takes traces)", args[0])
			}
			if *n < 1 || *n > maxN {
				return badUsage("--n %d: want 1 to %d", *n, maxN)
			}
			if len(f.routes) > 0 {
				return badUsage("--pool: the lab's scenarios have their pool rows (%d B); carve replay takes --pool", labPool)
			}
			base, err := f.specs()
			if err != nil {
				return err
			}
			// The shipped traces, one row per allocator.
			shipped := base
			for _, t := range traces.All() {
				tr, err := f.resolve(t.Name)
				if err != nil {
					return err
				}
				shipped.traces = append(shipped.traces, tr)
			}
			// The scenarios, one row per allocator and one per allocator
			// behind the pool.
			scen := base
			scen.specs = nil
			for _, s := range base.specs {
				scen.specs = append(scen.specs, s)
				if !rows.IsReal(s.Alloc) {
					s.Routes = replay.SizePools(labPool)
					scen.specs = append(scen.specs, s)
				}
			}
			for _, arg := range labScenarios(*n) {
				tr, err := traces.Resolve(arg)
				if err != nil {
					return err
				}
				scen.traces = append(scen.traces, tr)
			}

			if f.format == "text" {
				fmt.Fprint(c.stdout, `carve lab: each trace through each allocator. RSS/live, the headline, is how far each heap
grew beyond live memory: peak resident bytes over peak live bytes (1.000: not at all). The
footprint columns are each allocator's own figure of the memory it holds, and rank nothing across
allocators (--wide shows them all).

`)
			}
			var prog *progress
			if f.progress {
				prog = startProgress(c.stderr, shipped.replays()+scen.replays())
			}
			tables := rows.Run(shipped.traces, shipped.specs, shipped.opt, shipped.jobs, prog.counts())
			tables = append(tables, rows.Run(scen.traces, scen.specs, scen.opt, scen.jobs, prog.counts())...)
			prog.stop()
			err = emit(c, tables, &f)
			if f.format == "text" {
				fmt.Fprint(c.stdout, `More: carve report -o report.html aosp-systemui (these tables as charts over time, with maps
        of the heaps);
      carve scenario connection --next 4096 (the block-allocator article's experiments, in its
        words, on every malloc);
      carve advise aosp-systemui (which pools would lower the peak, measured);
      carve help (all commands).
`)
			}
			return err
		}
	},
}

// shippedHelp names the traces the lab replays first, the shipped ones,
// each with what it is.
func shippedHelp() string {
	var b strings.Builder
	b.WriteString("The shipped traces:\n")
	for _, t := range traces.All() {
		fmt.Fprintf(&b, "  %s: %s\n", t.Name, t.About)
	}
	return b.String()
}
