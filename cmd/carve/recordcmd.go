package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	iofs "io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/carvelab/carve/internal/text"
	"github.com/carvelab/carve/lab/record"
)

var recordCommand = &command{
	name: "record", args: "[-o FILE] [--recorder NAME] -- COMMAND [ARGS...] | -o FILE --from URL [--seconds N]",
	short: "run a program and write its allocation trace",
	long: `The program's standard input, output and error are carve's own, so the
trace goes to FILE (default: COMMAND's base name + .trace). Interrupting carve
(Ctrl-C) interrupts the program; what it did until then is written. The
recorders see calls to the C library's malloc: a Go program's own heap is not
among them, nor Python's small objects unless it runs with PYTHONMALLOC=malloc.
--recorders says what each recorder keeps and loses.

A Go program's own heap is recorded from its execution trace, with every
object's type: go test (carve record -- go test -run TestX ./pkg); a binary
that calls defer selftrace.Start()() first in main (package
github.com/carvelab/carve/lab/selftrace), recorded as any program; or a
running service that imports net/http/pprof and runs with
GODEBUG=traceallocfree=1 (carve record -o FILE --from http://127.0.0.1:6060
--seconds 5). Starting the trace stops the world for a snapshot of the whole
heap, and allocation is slower while it runs: carve prints the pause.`,
	setup: func(fs *flag.FlagSet) func(*cli, []string) error {
		out := fs.String("o", "", "write the trace to `FILE` (default: COMMAND's name + .trace)")
		var names []string
		for _, r := range record.Recorders() {
			names = append(names, r.Name)
		}
		rec := fs.String("recorder", record.Default, "the `RECORDER`: "+strings.Join(names, ", "))
		list := fs.Bool("recorders", false, "describe the recorders, what each keeps and loses, and stop")
		from := fs.String("from", "", "record the running Go service at `URL` (net/http/pprof) instead of a COMMAND")
		seconds := fs.Float64("seconds", 5, "with --from, trace the service for `N` seconds")
		return func(c *cli, cmd []string) error {
			if *from != "" {
				return recordService(c, *out, *from, *seconds, *rec, cmd)
			}
			if *list {
				for _, r := range record.Recorders() {
					avail := "available"
					if err := record.Available(r.Name); err != nil {
						avail = err.Error()
					}
					fmt.Fprintf(c.stdout, "%s (%s)\n  keeps: %s\n  loses: %s\n  processes: %s\n  needs: %s\n\n", r.Name, avail, r.Keeps, r.Loses, r.Processes, r.Needs)
				}
				return nil
			}
			if len(cmd) == 0 {
				return badUsage("want -- COMMAND [ARGS...]")
			}
			if err := record.AvailableFor(*rec, cmd); err != nil {
				return badUsage("%v", err)
			}
			path := *out
			if path == "" {
				path = strings.TrimSuffix(filepath.Base(cmd[0]), ".exe") + ".trace"
			}
			// The trace is written to a temporary file beside the target and
			// renamed when complete: a failed recording leaves no file.
			tmp, err := os.CreateTemp(filepath.Dir(path), ".carve-record-*")
			if err != nil {
				return badUsage("-o %s: %v", path, err)
			}
			defer os.Remove(tmp.Name())
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, recErr := record.Record(ctx, cmd, tmp, record.Options{Recorder: *rec, Stdin: c.stdin, Stdout: c.stdout, Stderr: c.stderr})
			if err := tmp.Close(); err != nil {
				return err
			}
			var exit *record.ExitError
			switch {
			case errors.Is(recErr, record.ErrUsage):
				return inputError{recErr} // a command that cannot be recorded as given
			case errors.Is(recErr, record.ErrNoEvents):
				return inputError{fmt.Errorf("%s made no allocation the %s recorder saw (a pure-Go program, or a static one, calls no malloc): no trace written: %w", cmd[0], *rec, recErr)}
			case errors.Is(recErr, exec.ErrNotFound), errors.As(recErr, new(*iofs.PathError)):
				return inputError{recErr} // the program cannot be run
			case recErr != nil && !errors.As(recErr, &exit):
				return recErr
			}
			if err := os.Rename(tmp.Name(), path); err != nil {
				return err
			}
			threads := ""
			if res.Threads > 0 {
				threads = ", " + text.Count(int64(res.Threads), "thread")
			}
			fmt.Fprintf(c.stderr, "carve record: %d events from %s (pid %d%s) written to %s by the %s recorder\n",
				res.Events, res.Process.Program, res.Process.Pid, threads, path, res.Recorder)
			printPause(c, res)
			if res.CHeapOnly {
				fmt.Fprintf(c.stderr, "carve record: %s is a Go program: the trace holds only its C heap (cgo); its Go heap is recorded from its tests: carve record -- go test -run TestX ./pkg\n", cmd[0])
			}
			if len(res.Others) > 0 {
				fmt.Fprintf(c.stderr, "carve record: %s of the run were logged and left out (the busiest one is kept)\n", text.Count(int64(len(res.Others)), "other process"))
			}
			if exit != nil {
				return checkFailed{fmt.Errorf("the program exited with status %d; its trace until then is written", exit.Code)}
			}
			return nil
		}
	},
}

// recordService is carve record --from: the trace of a running service.
func recordService(c *cli, path, from string, seconds float64, rec string, cmd []string) error {
	switch {
	case len(cmd) > 0:
		return badUsage("--from records a running service: no COMMAND (%s)", cmd[0])
	case rec != record.Default && rec != "go":
		return badUsage("--from records a Go service's own heap, not with the %s recorder: leave --recorder out", rec)
	case seconds <= 0:
		return badUsage("--seconds %v: want a duration above 0", seconds)
	}
	if path == "" {
		path = "service.trace"
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".carve-record-*")
	if err != nil {
		return badUsage("-o %s: %v", path, err)
	}
	defer os.Remove(tmp.Name())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d := time.Duration(seconds * float64(time.Second))
	fmt.Fprintf(c.stderr, "carve record: tracing the service at %s for %v\n", from, d)
	res, recErr := record.FromService(ctx, from, d, tmp, record.Options{})
	if err := tmp.Close(); err != nil {
		return err
	}
	switch {
	case errors.Is(recErr, record.ErrUsage):
		return inputError{recErr} // nothing listens there, no pprof, no alloc/free events
	case recErr != nil:
		return recErr
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	fmt.Fprintf(c.stderr, "carve record: %d events from %s written to %s\n", res.Events, res.Process.Program, path)
	printPause(c, res)
	return nil
}

// printPause says how long the world stopped as a Go execution trace
// started.
func printPause(c *cli, res record.Result) {
	if res.StartPause > 0 {
		fmt.Fprintf(c.stderr, "carve record: starting the trace stopped the world for %v (a snapshot of the whole heap); allocation is slower while it runs\n",
			res.StartPause.Round(10*time.Microsecond))
	}
}
