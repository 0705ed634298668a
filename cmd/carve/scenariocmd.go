package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/carvelab/carve/internal/text"
	"github.com/carvelab/carve/lab/rows"
	"github.com/carvelab/carve/lab/scenario"
)

var scenarioCommand = &command{
	name: "scenario", args: strings.Join(scenario.Names, "|") + " [flags]", interspersed: true,
	short: "the block-allocator article's experiments, a line per allocator in the article's words (MB; --wide: KB)",
	long: scenarioList() + `
The real mallocs run in child processes and are measured by their RSS, as the
article measured glibc; carve's heaps by their own resident pages.`,
	setup: func(fs *flag.FlagSet) func(*cli, []string) error {
		alloc := fs.String("alloc", "all", "comma-separated `LIST` of allocators, or all")
		n := fs.Int("n", 0, nUsage())
		next := fs.Int("next", 4096, "size of the new buffers ("+readers("next")+")")
		from := fs.String("from", "malloc", "where the scratch buffers come from: malloc or pool ("+readers("from")+")")
		smalls := fs.Int("smalls", 1, "1 to allocate the small objects between the waves, 0 not to ("+readers("smalls")+")")
		jobs := fs.Int("jobs", 2, "allocators measured at once")
		wide := fs.Bool("wide", false, "print each line in full, however wide: the article's wording with every figure in KB, and the figures it does not give (without it a line fits "+strconv.Itoa(maxWidth)+" characters)")
		var maxRequest, maxRSS byteSize
		budgetFlags(fs, &maxRequest, &maxRSS)
		return func(c *cli, args []string) error {
			if len(args) != 1 {
				return badUsage("want one scenario: %s", strings.Join(scenario.Names, ", "))
			}
			sc, ok := scenario.Lookup(args[0])
			if !ok {
				return badUsage("unknown scenario %q%s: want one of %s", args[0], suggest(args[0], scenario.Names), strings.Join(scenario.Names, ", "))
			}
			var unread error
			nSet := false
			fs.Visit(func(f *flag.Flag) {
				switch f.Name {
				case "n", "next", "from", "smalls":
					nSet = nSet || f.Name == "n"
					if !sc.Reads(f.Name) && unread == nil {
						unread = badUsage("--%s: %s does not read it; it is for %s", f.Name, sc.Name, readers(f.Name))
					}
				}
			})
			if unread != nil {
				return unread
			}
			if !nSet {
				*n = sc.N
			}
			switch {
			case sc.Reads("n") && (*n < 1 || *n > maxN):
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
			cfg := scenario.Config{Allocs: names, N: *n, Next: *next, FromPool: *from == "pool", Smalls: *smalls, Jobs: *jobs, Wide: *wide, Progress: prog.counts(),
				MaxRequest: int64(maxRequest), MaxRSS: int64(maxRSS)}
			err = sc.Run(c.stdout, cfg)
			return classify(err)
		}
	},
}

// scenarioList is carve help scenario's list: each scenario's name and
// what it does.
func scenarioList() string {
	var b strings.Builder
	for _, s := range scenario.Scenarios {
		for i, l := range text.Wrap(s.Doc, 66) {
			name := ""
			if i == 0 {
				name = s.Name
			}
			fmt.Fprintf(&b, "%-10s  %s\n", name, l)
		}
	}
	return b.String()
}

// readers lists the scenarios that read a flag of Scenario.Flags, or n.
func readers(flag string) string {
	var names []string
	for _, s := range scenario.Scenarios {
		if s.Reads(flag) {
			names = append(names, s.Name)
		}
	}
	return strings.Join(names, ", ")
}

// nUsage is --n's usage: what each scenario that reads it counts, and
// its default: "connections (connection, carving, default 100000) or
// ...".
func nUsage() string {
	type group struct {
		count string
		names []string
		n     int
	}
	var gs []group
scenarios:
	for _, s := range scenario.Scenarios {
		if !s.Reads("n") {
			continue
		}
		for i, g := range gs {
			if g.count == s.Count && g.n == s.N {
				gs[i].names = append(g.names, s.Name)
				continue scenarios
			}
		}
		gs = append(gs, group{s.Count, []string{s.Name}, s.N})
	}
	var parts []string
	for _, g := range gs {
		parts = append(parts, fmt.Sprintf("%s (%s, default %d)", g.count, strings.Join(g.names, ", "), g.n))
	}
	return strings.Join(parts, " or ")
}
