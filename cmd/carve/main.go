// Command carve is carve's fragmentation lab: it replays allocation traces
// through carve's allocators and prints how far each heap grows beyond
// live memory.
//
// Usage:
//
//	carve                          the lab on its embedded defaults
//	carve lab [--n N] [flags]      the same, the scenarios at N connections
//	carve demo                     the pool and arena demonstrations
//	carve replay [flags] TRACE...
//	carve report [-o FILE] TRACE...  the HTML report
//	carve advise [--base HEAP] TRACE  the pools a trace needs, measured
//	carve scenario NAME [flags]    the block-allocator article's experiments, a line per allocator
//	carve record [-o FILE] [--recorder NAME] -- COMMAND [ARGS...]
//	carve gen NAME [-o FILE] [param=value...]
//	carve convert [-o FILE] TRACE
//	carve stats TRACE
//	carve help                     this text
//
// Exit codes: 0 ok, 1 a check failed, 2 bad usage or unreadable input.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
)

const usage = `carve: memory allocators outside the Go heap, and a lab for heap fragmentation

Usage:
  carve            the lab on its embedded defaults: the shipped trace and
                   the block-allocator article's scenarios through every allocator
  carve lab [--n N] [replay flags]
                   the same, the scenarios with N connections (10000)
  carve demo       the article's pool and arena checks, the stride lesson, the
                   connection scenario on carve's pools, the bump benchmark
  carve replay [flags] TRACE...
                   replay each trace through the allocators, one table per
                   trace. A TRACE is a file, a shipped trace (aosp-systemui)
                   or gen:NAME[:param=value,...]. Flags:
                   --alloc LIST|all  first-fit, next-fit, best-fit,
                                     ao-first-fit, buddy, buddy-header,
                                     sizeclass, go (the Go heap), glibc,
                                     jemalloc, tcmalloc, mimalloc (each in
                                     a child process, LD_PRELOAD)
                   --pool SIZE       requests of SIZE bytes in a pool in
                                     front of each allocator (repeatable)
                   --format F        text, markdown, csv or json
                   --stable          leave out ns/op and peak RSS
                   --strict          stop at a trace error (exit 1)
                   --nocheck         skip the correctness checks
                   --jobs N          replays at once (all cores)
                   --isolate         carve's heaps in child processes too
                   --html FILE       also write the HTML report
  carve report [-o report.html] [replay flags] TRACE...
                   replay and write one self-contained HTML file: footprint
                   and RSS over time against live memory, fragmentation
                   by allocator, sizes and lifetimes, the table
  carve advise [--base HEAP] [--min SAVING] [--max N] [--format text|json] TRACE
                   find the sizes whose dedicated pools lower the heap's
                   peak footprint most, by replaying candidates; prints
                   the measured savings and the Go code for the pools
  carve scenario connection|carving|stride|pool|bump [flags]
                   the block-allocator article's experiments, a line per allocator:
                   connection [--next 1024|4096] [--n N]
                   carving [--from malloc|pool] [--smalls 0|1] [--n N]
  carve record [-o FILE] [--recorder NAME] -- COMMAND [ARGS...]
                   run a program and write its allocation trace (carve's
                   LD_PRELOAD recorder by default; valgrind, heaptrack,
                   mtrace; --recorders says what each keeps and loses)
  carve gen NAME [-o FILE] [param=value...]
                   write a generated trace (connection, carving, bump,
                   zipf, phases) in carve's native format
  carve convert [-o FILE] TRACE
                   rewrite a trace (native, rep, valgrind, heaptrack,
                   mtrace, aosp; gzip or zstd) in carve's native format
  carve stats TRACE
                   sizes, lifetimes, peak live and Robson's bounds
  carve help       print this text

Exit codes: 0 ok, 1 a check failed, 2 bad usage or unreadable input.
`

// exitCode prints err and maps it to the exit codes: 0 ok, 1 a check
// failed, 2 bad usage or unreadable input.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "%v\n", err)
	var u usageError
	var in inputError
	var cf checkFailed
	switch {
	case errors.As(err, &u):
		fmt.Fprintf(stderr, "\n%s", usage)
		return 2
	case errors.As(err, &in):
		return 2
	case errors.As(err, &cf):
		return 1
	}
	return 1
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command line, separated from main for tests.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := "lab"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "demo":
		if len(args) > 0 {
			fmt.Fprintf(stderr, "carve demo: unexpected argument %q\n\n%s", args[0], usage)
			return 2
		}
		if err := demo(stdout, defaultDemo); err != nil {
			fmt.Fprintf(stderr, "carve: %v\n", err)
			return 1
		}
		return 0
	case "lab", "replay", "report", "advise", "scenario", "record", childCommand:
		return exitCode(map[string]func([]string, io.Writer, io.Writer) error{
			"lab": cmdLab, "replay": cmdReplay, "report": cmdReport, "advise": cmdAdvise,
			"scenario": cmdScenario, "record": cmdRecord, childCommand: cmdChild,
		}[cmd](args, stdout, stderr), stderr)
	case "gen", "convert", "stats":
		return exitCode(map[string]func([]string, io.Writer) error{
			"gen": cmdGen, "convert": cmdConvert, "stats": cmdStats,
		}[cmd](args, stdout), stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "carve: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
}
