package main

import (
	"flag"
	"strings"

	"github.com/carvelab/carve/lab/rows"
	"github.com/carvelab/carve/lab/scenario"
)

var scenarioCommand = &command{
	name: "scenario", args: "connection|carving|stride|pool|bump [flags]", interspersed: true,
	short: "the block-allocator article's experiments, a line per allocator in the article's words",
	long: `connection  100,000 connections, each a 1 KiB scratch buffer and a 64-byte
            session; the scratch buffers freed; --n new buffers of --next bytes
            (1024: they fit the holes; 4096: they cannot)
carving     the connection setup, the scratch freed, small objects settling
            into the holes (--smalls 1), then a second wave of 1 KiB buffers;
            --from pool puts the buffers in a carve pool
stride      how far apart two malloc(16)s land, and how many bytes each holds
pool        the article's pool.cpp: four chunks, a fifth refused, a freed
            chunk reused
bump        5,000,000 Person values through carve's arena and every allocator
            (the post "Bump Allocator")

The real mallocs run in child processes and are measured by their RSS, as the
article measured glibc; carve's heaps by their own resident pages.`,
	setup: func(fs *flag.FlagSet) func(*cli, []string) error {
		alloc := fs.String("alloc", "all", "comma-separated `LIST` of allocators, or all")
		n := fs.Int("n", 100000, "connections (connection, carving) or objects (bump, default 5000000)")
		next := fs.Int("next", 4096, "size of the new buffers (connection)")
		from := fs.String("from", "malloc", "where the scratch buffers come from: malloc or pool (carving)")
		smalls := fs.Int("smalls", 1, "1 to allocate the small objects between the waves, 0 not to (carving)")
		jobs := fs.Int("jobs", 2, "allocators measured at once")
		var maxRequest, maxRSS byteSize
		budgetFlags(fs, &maxRequest, &maxRSS)
		return func(c *cli, args []string) error {
			if len(args) != 1 {
				return badUsage("want one scenario: %s", strings.Join(scenario.Names, ", "))
			}
			name := args[0]
			nSet := false
			fs.Visit(func(f *flag.Flag) { nSet = nSet || f.Name == "n" })
			if name == "bump" && !nSet {
				*n = 5000000 // the benchmark of the post "Bump Allocator"
			}
			switch {
			case *n < 1 || *n > maxN:
				return badUsage("--n %d: want 1 to %d", *n, maxN)
			case *next < 0:
				return badUsage("--next %d: want a size of 0 bytes or more", *next)
			case *jobs < 1:
				return badUsage("--jobs %d: want 1 or more", *jobs)
			case *smalls != 0 && *smalls != 1:
				return badUsage("--smalls %d: want 0 or 1", *smalls)
			case *from != "malloc" && *from != "pool":
				return badUsage("--from %q: want malloc or pool", *from)
			}
			names, err := rows.Parse(*alloc)
			if err != nil {
				return badUsage("--alloc: %v", err)
			}
			prog := startProgress(c.stderr, len(names))
			defer prog.stop()
			cfg := scenario.Config{Allocs: names, N: *n, Next: *next, FromPool: *from == "pool", Smalls: *smalls, Jobs: *jobs, Progress: prog.counts(),
				MaxRequest: int64(maxRequest), MaxRSS: int64(maxRSS)}
			switch name {
			case "connection":
				err = scenario.Connection(c.stdout, cfg)
			case "carving":
				err = scenario.Carving(c.stdout, cfg)
			case "stride":
				err = scenario.Stride(c.stdout, cfg)
			case "pool":
				err = scenario.Pool(c.stdout)
			case "bump":
				err = scenario.Bump(c.stdout, cfg)
			default:
				return badUsage("unknown scenario %q%s: want one of %s", name, suggest(name, scenario.Names), strings.Join(scenario.Names, ", "))
			}
			return classify(err)
		}
	},
}
