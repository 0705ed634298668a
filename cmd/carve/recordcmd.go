package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/carvelab/carve/lab/record"
)

// cmdRecord runs a program and writes its allocation trace:
// carve record [-o FILE] [--recorder NAME] -- COMMAND [ARGS...].
//
// The program's standard input, output and error are carve's own, so
// without -o the trace needs its own place: it is written to FILE, and
// standard output is the program's. With no -o the trace goes to
// COMMAND's base name + ".trace". Interrupting carve (Ctrl-C) interrupts
// the program; what it did until then is written.
func cmdRecord(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("record", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("o", "", "write the trace to `FILE` (default: COMMAND's name + .trace)")
	var names []string
	for _, r := range record.Recorders() {
		names = append(names, r.Name)
	}
	rec := fs.String("recorder", record.Default, "the recorder: "+strings.Join(names, ", "))
	list := fs.Bool("recorders", false, "describe the recorders, what each keeps and loses, and stop")
	if err := fs.Parse(args); err != nil {
		return badUsage("carve record: %v", err)
	}
	if *list {
		for _, r := range record.Recorders() {
			avail := "available"
			if err := record.Available(r.Name); err != nil {
				avail = err.Error()
			}
			fmt.Fprintf(stdout, "%s (%s)\n  keeps: %s\n  loses: %s\n  processes: %s\n  needs: %s\n\n", r.Name, avail, r.Keeps, r.Loses, r.Processes, r.Needs)
		}
		return nil
	}
	cmd := fs.Args()
	if len(cmd) == 0 {
		return badUsage("carve record: want -- COMMAND [ARGS...]")
	}
	if err := record.Available(*rec); err != nil {
		return badUsage("carve record: %v", err)
	}
	path := *out
	if path == "" {
		path = strings.TrimSuffix(filepath.Base(cmd[0]), ".exe") + ".trace"
	}
	// The trace is written to a temporary file beside the target and
	// renamed when complete: a failed recording leaves no empty file.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".carve-record-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, recErr := record.Record(ctx, cmd, tmp, record.Options{Recorder: *rec, Stdin: os.Stdin, Stdout: stdout, Stderr: stderr})
	if err := tmp.Close(); err != nil {
		return err
	}
	if errors.Is(recErr, record.ErrNoEvents) {
		return inputError{fmt.Errorf("carve record: %s made no allocation the %s recorder saw (a pure-Go program, or a static one, calls no malloc): no trace written: %w", cmd[0], *rec, recErr)}
	}
	var exit *record.ExitError
	if recErr != nil && !errors.As(recErr, &exit) {
		return fmt.Errorf("carve record: %w", recErr)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "carve record: %d events from %s (pid %d, %d threads) written to %s by the %s recorder\n",
		res.Events, res.Process.Program, res.Process.Pid, res.Threads, path, res.Recorder)
	if len(res.Others) > 0 {
		fmt.Fprintf(stderr, "carve record: %d other processes of the run were logged and left out (the busiest one is kept)\n", len(res.Others))
	}
	if exit != nil {
		return checkFailed{fmt.Errorf("carve record: the program exited with status %d; its trace until then is written", exit.Code)}
	}
	return nil
}
