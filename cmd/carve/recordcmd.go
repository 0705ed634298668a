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

	"github.com/carvelab/carve/lab/record"
)

var recordCommand = &command{
	name: "record", args: "[-o FILE] [--recorder NAME] -- COMMAND [ARGS...]",
	short: "run a program and write its allocation trace",
	long: `The program's standard input, output and error are carve's own, so the
trace goes to FILE (default: COMMAND's base name + .trace). Interrupting carve
(Ctrl-C) interrupts the program; what it did until then is written. The
recorders see calls to the C library's malloc: a Go program's own heap is not
among them, nor Python's small objects unless it runs with PYTHONMALLOC=malloc.
--recorders says what each recorder keeps and loses.`,
	setup: func(fs *flag.FlagSet) func(*cli, []string) error {
		out := fs.String("o", "", "write the trace to `FILE` (default: COMMAND's name + .trace)")
		var names []string
		for _, r := range record.Recorders() {
			names = append(names, r.Name)
		}
		rec := fs.String("recorder", record.Default, "the `RECORDER`: "+strings.Join(names, ", "))
		list := fs.Bool("recorders", false, "describe the recorders, what each keeps and loses, and stop")
		return func(c *cli, cmd []string) error {
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
				threads = ", " + plural(res.Threads, "thread")
			}
			fmt.Fprintf(c.stderr, "carve record: %d events from %s (pid %d%s) written to %s by the %s recorder\n",
				res.Events, res.Process.Program, res.Process.Pid, threads, path, res.Recorder)
			if res.CHeapOnly {
				fmt.Fprintf(c.stderr, "carve record: %s is a Go program: the trace holds only its C heap (cgo); its Go heap is recorded from its tests: carve record -- go test -run TestX ./pkg\n", cmd[0])
			}
			if len(res.Others) > 0 {
				fmt.Fprintf(c.stderr, "carve record: %s of the run were logged and left out (the busiest one is kept)\n", plural(len(res.Others), "other process"))
			}
			if exit != nil {
				return checkFailed{fmt.Errorf("the program exited with status %d; its trace until then is written", exit.Code)}
			}
			return nil
		}
	},
}

// plural writes n and the noun, with an s when n is not 1: "1 thread",
// "3 threads", "2 other processes".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "s") {
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
