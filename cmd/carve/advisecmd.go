package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strings"

	"github.com/carvelab/carve/lab/advise"
	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/traces"
)

// cmdAdvise suggests pools for a trace: carve advise [flags] TRACE.
func cmdAdvise(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("advise", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var c advise.Config
	fs.StringVar(&c.Base, "base", advise.DefaultBase, "the `ALLOCATOR` the pools go in front of: "+strings.Join(replay.Names(), ", "))
	fs.Var(&c.Min, "min", "the least `SAVING` of peak footprint a pool must bring: bytes (65536, 64KiB, 1MiB) or a percentage of the baseline's peak (2%); default 1%, at least 64 KiB")
	fs.IntVar(&c.MaxPools, "max", 4, "suggest at most `N` pools")
	fs.IntVar(&c.Candidates, "candidates", 8, "replay the `N` most requested sizes and the N sizes taking the most bytes")
	fs.IntVar(&c.Jobs, "jobs", runtime.GOMAXPROCS(0), "replays to run at once")
	format := fs.String("format", "text", "output `FORMAT`: text or json (schema "+advise.Schema+")")
	paths, err := parseInterspersed(fs, args)
	if err != nil {
		return badUsage("carve advise: %v", err)
	}
	switch {
	case len(paths) != 1:
		return badUsage("carve advise: want one TRACE (%s), got %d", traces.Usage(), len(paths))
	case *format != "text" && *format != "json":
		return badUsage("carve advise: --format %q: want text or json", *format)
	case c.MaxPools < 1:
		return badUsage("carve advise: --max %d: want 1 or more", c.MaxPools)
	case c.Candidates < 1:
		return badUsage("carve advise: --candidates %d: want 1 or more", c.Candidates)
	case c.Jobs < 1:
		return badUsage("carve advise: --jobs %d: want 1 or more", c.Jobs)
	}
	if _, real := realMallocs[c.Base]; real {
		return badUsage("carve advise: --base %s: the real mallocs run in child processes, and the advisor replays in this one: want one of %s", c.Base, strings.Join(replay.Names(), ", "))
	}
	if c.Trace, err = traces.Resolve(paths[0]); err != nil {
		return inputError{fmt.Errorf("carve advise: %w", err)}
	}
	adv, err := advise.Advise(c)
	switch {
	case errors.Is(err, advise.ErrBase):
		return badUsage("carve advise: --base: %v", err)
	case err != nil:
		return classify(fmt.Errorf("carve advise: %w", err))
	}
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false) // the Go snippet's << as is
		return enc.Encode(adv)
	}
	return adv.WriteText(stdout)
}

// classify wraps an error a replay stopped with in the type its exit code
// comes from: an unreadable trace (2), a failed check (1).
func classify(err error) error {
	switch errorKind(err) {
	case kindInput:
		return inputError{err}
	case kindCheck:
		return checkFailed{err}
	}
	return err
}
