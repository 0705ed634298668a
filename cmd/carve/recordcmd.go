package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/carvelab/carve/internal/size"
	"github.com/carvelab/carve/internal/text"
	"github.com/carvelab/carve/lab/record"
	"github.com/carvelab/carve/lab/trace"
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
heap, and allocation is slower while it runs: carve prints the pause.

While the program runs, carve reads its VmRSS and VmHWM (/proc/PID/status)
every 100 ms: of the test binary of a go test run, placed among the trace's
events by its clock; of a C program (valgrind's process, under valgrind),
its peak only. carve prints the peak. A service's trace (--from) has none.`,
	setup: func(fs *flag.FlagSet) func(*cli, []string) error {
		out := fs.String("o", "", "write the trace to `FILE` (default: COMMAND's name + .trace)")
		var names []string
		for _, r := range record.Recorders() {
			names = append(names, r.Name)
		}
		rec := fs.String("recorder", record.Default, "the `RECORDER`: "+strings.Join(names, ", "))
		list := fs.Bool("recorders", false, "describe the recorders, what each keeps and loses, and stop")
		stacks := fs.Bool("stacks", true, "carve's recorder: keep each allocation's call stack, its site (false: the recorder's speed without)")
		from := fs.String("from", "", "record the running Go service at `URL` (net/http/pprof) instead of a COMMAND")
		seconds := fs.Float64("seconds", 5, "with --from, trace the service for `N` seconds")
		var tf traceFlags
		tf.register(fs)
		return func(c *cli, cmd []string) error {
			if *from != "" {
				return recordService(c, *out, *from, *seconds, *rec, cmd, int64(tf.maxGoGeneration))
			}
			if *list {
				o, err := openOutput("", c.stdout)
				if err != nil {
					return err
				}
				return o.written(func(w io.Writer) error {
					for _, r := range record.Recorders() {
						avail := "available"
						if err := record.Available(r.Name); err != nil {
							avail = err.Error()
						}
						fmt.Fprintf(w, "%s (%s)\n  keeps: %s\n  loses: %s\n  processes: %s\n  needs: %s\n\n", r.Name, avail, r.Keeps, r.Loses, r.Processes, r.Needs)
					}
					return nil
				})
			}
			if len(cmd) == 0 {
				return badUsage("want -- COMMAND [ARGS...]")
			}
			if err := record.AvailableFor(*rec, cmd); err != nil {
				return badUsage("%v", err)
			}
			if _, err := exec.LookPath(cmd[0]); err != nil {
				return badUsage("cannot run %s: %v", cmd[0], lookPathReason(err))
			}
			path := *out
			if path == "" {
				path = strings.TrimSuffix(filepath.Base(cmd[0]), ".exe") + ".trace"
			}
			// Checked before the program runs: the trace goes where -o
			// says, as every command's output does, and never over the
			// program or a file it is given.
			o, err := openOutputFile(path, nil, record.Inputs(cmd)...)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, recErr := record.Record(ctx, cmd, o, record.Options{Recorder: *rec, Stdin: c.stdin, Stdout: c.stdout, Stderr: c.stderr, MaxGoGeneration: int64(tf.maxGoGeneration), NoStacks: !*stacks})
			var exit *record.ExitError
			errors.As(recErr, &exit)
			written := recErr == nil || exit != nil && !errors.Is(recErr, record.ErrNoEvents) ||
				errors.Is(recErr, context.Canceled) && !errors.Is(recErr, record.ErrNoEvents) && res.Events > 0
			if err := o.finish(written); err != nil && (written || o.err != nil) {
				return err // writing the trace failed
			}
			switch {
			case errors.Is(recErr, record.ErrUsage):
				return inputError{recErr} // a command that cannot be recorded as given
			case errors.Is(recErr, record.ErrNoEvents):
				return inputError{fmt.Errorf("%s: no trace written: %w", cmd[0], recErr)}
			case errors.Is(recErr, exec.ErrNotFound), errors.As(recErr, new(*iofs.PathError)):
				return inputError{recErr} // the program cannot be run
			case recErr != nil && !written:
				return recErr
			}
			threads := ""
			if res.Threads > 0 {
				threads = ", " + text.Count(int64(res.Threads), "thread")
			}
			fmt.Fprintf(c.stderr, "carve record: %d events from %s (pid %d%s) written to %s by the %s recorder\n",
				res.Events, res.Process.Program, res.Process.Pid, threads, path, res.Recorder)
			printRSS(c, res)
			printPause(c, res)
			printSites(c, res)
			if res.Cut > 0 {
				fmt.Fprintf(c.stderr, "carve record: the program ended while its last allocator call was being logged: %s, cut short, is left out\n",
					text.Count(int64(res.Cut), "record"))
			}
			if res.Stopped != "" {
				fmt.Fprintf(c.stderr, "carve record: %s: the program's calls after the trace's last event are lost\n", res.Stopped)
			}
			if res.CHeapOnly {
				fmt.Fprintf(c.stderr, "carve record: %s is a Go program: the trace holds only its C heap (cgo); its Go heap is recorded from its tests: carve record -- go test -run TestX ./pkg\n", cmd[0])
			}
			if len(res.Others) > 0 {
				fmt.Fprintf(c.stderr, "carve record: %s of the run were logged and left out (the busiest one is kept)\n", text.Count(int64(len(res.Others)), "other process"))
			}
			if recErr != nil && exit == nil {
				return recErr // interrupted: the trace until then is written
			}
			if exit != nil {
				return checkFailed{fmt.Errorf("the program ended with %s; its trace until then is written", exit.State)}
			}
			return nil
		}
	},
}

// lookPathReason is why exec.LookPath did not find a program: its
// error, less the name it repeats.
func lookPathReason(err error) error {
	var e *exec.Error
	if errors.As(err, &e) {
		if errors.Is(e.Err, iofs.ErrPermission) {
			return errors.New("not an executable file (a directory, or a file without execute permission)")
		}
		return e.Err
	}
	return err
}

// recordService is carve record --from: the trace of a running service.
func recordService(c *cli, path, from string, seconds float64, rec string, cmd []string, maxGoGeneration int64) error {
	switch {
	case len(cmd) > 0:
		return badUsage("--from records a running service: no COMMAND (%s)", cmd[0])
	case rec != record.Default && rec != "go":
		return badUsage("--from records a Go service's own heap, not with the %s recorder: leave --recorder out", rec)
	case !(seconds > 0) || seconds > record.MaxServiceTrace.Seconds(): // NaN too
		return badUsage("--seconds %v: want a duration above 0, up to %v", seconds, record.MaxServiceTrace.Seconds())
	}
	if path == "" {
		path = "service.trace"
	}
	o, err := openOutputFile(path, nil)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d := time.Duration(seconds * float64(time.Second))
	fmt.Fprintf(c.stderr, "carve record: tracing the service at %s for %v\n", record.Redacted(from), d)
	res, recErr := record.FromService(ctx, from, d, o, record.Options{MaxGoGeneration: maxGoGeneration})
	if err := o.finish(recErr == nil); err != nil && (recErr == nil || o.err != nil) {
		return err // writing the trace failed
	}
	switch {
	case errors.Is(recErr, record.ErrUsage):
		return inputError{recErr} // nothing listens there, no pprof, no alloc/free events
	case recErr != nil:
		return recErr
	}
	fmt.Fprintf(c.stderr, "carve record: %d events from %s written to %s\n", res.Events, res.Process.Program, path)
	printRSS(c, res)
	printPause(c, res)
	return nil
}

// printRSS says the recorded process's peak RSS, as the trace's samples
// of it have it, or why the trace has none.
func printRSS(c *cli, res record.Result) {
	_, hwm, ok := trace.RSSPeak(res.ProcessRSS)
	if !ok {
		if res.NoRSS != "" {
			fmt.Fprintf(c.stderr, "carve record: no samples of the RSS in the trace: %s\n", res.NoRSS)
		}
		return
	}
	how := ""
	if res.RSSAtExit {
		how = ", and at its exit"
	}
	if res.ProcessRSS[0].Event < 0 {
		how += "; the trace holds the peak only"
	}
	fmt.Fprintf(c.stderr, "carve record: peak RSS %s of %s (VmHWM, sampled every %d ms: %s%s)\n",
		size.Format(int64(hwm)), trace.RSSOfText(res.ProcessRSS[0].Of), record.RSSEvery.Milliseconds(),
		text.Count(int64(res.RSSSampled), "sample"), how)
}

// printSites says how many of a go test's allocated bytes got a site
// from its heap profile (see package record's sites), or why none did;
// of a C program's, how many have a call stack, at how many sites.
func printSites(c *cli, res record.Result) {
	switch {
	case res.SitesErr != nil:
		fmt.Fprintf(c.stderr, "carve record: no allocation sites: %v\n", res.SitesErr)
	case res.CSites.Allocs > 0:
		cs := res.CSites
		fmt.Fprintf(c.stderr, "carve record: sites: %s of the %s allocated (%.1f%%) have a call stack, at %s (carve stats --by site)",
			size.Format(int64(cs.Bytes)), size.Format(int64(cs.AllBytes)), 100*float64(cs.Bytes)/float64(max(cs.AllBytes, 1)), text.Count(int64(cs.Sites), "site"))
		if cs.Unnamed > 0 {
			fmt.Fprintf(c.stderr, "; %d named by address only, no symbol covering it (a stripped binary names its exported functions only)", cs.Unnamed)
		}
		fmt.Fprintln(c.stderr)
		for _, m := range cs.NoSymbols {
			fmt.Fprintf(c.stderr, "carve record: no symbols read: %s\n", m)
		}
	case res.Sites != nil && res.Import.GoBytes > 0:
		sampled := "every allocation profiled (-memprofilerate=1) but those of package initialisation, before the testing package sets the rate: sampled one in 512 KiB"
		if res.SitesSampled {
			sampled = "the profile sampled at the program's own rate (a service's allocs profile before and after the trace, or the test's own -memprofilerate): every site a share of its size's"
		}
		one := res.Import.GoSiteBytes - res.Import.GoShareBytes
		fmt.Fprintf(c.stderr, "carve record: sites: %s of the %s allocated (%.1f%%) have one, their size's allocations all from one call site in the heap profile; %s more (%.1f%%) one drawn by share among the sites of their size; the rest none, the profile not counting their size (%s)\n",
			size.Format(int64(one)), size.Format(int64(res.Import.GoBytes)), 100*float64(one)/float64(res.Import.GoBytes),
			size.Format(int64(res.Import.GoShareBytes)), 100*float64(res.Import.GoShareBytes)/float64(res.Import.GoBytes), sampled)
	}
}

// printPause says how long the world stopped as a Go execution trace
// started.
func printPause(c *cli, res record.Result) {
	if res.StartPause > 0 {
		fmt.Fprintf(c.stderr, "carve record: starting the trace stopped the world for %v (a snapshot of the whole heap); allocation is slower while it runs\n",
			res.StartPause.Round(10*time.Microsecond))
	}
}
