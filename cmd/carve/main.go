// Command carve runs carve's allocators on the seeds' experiments and
// prints what they measure.
//
// Usage:
//
//	carve                          the demonstrations on their embedded defaults
//	carve demo                     the same
//	carve replay [--alloc LIST|all] [--pool SIZE] [--strict] TRACE...
//	carve gen NAME [-o FILE] [param=value...]
//	carve convert [-o FILE] TRACE
//	carve stats TRACE
//	carve help                     this text
//
// Exit codes: 0 ok, 1 a check failed, 2 bad usage.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
)

const usage = `carve: memory allocators outside the Go heap, and what they cost

Usage:
  carve            run the demonstrations (the seeds' pool and arena checks,
                   the stride lesson, the connection scenario on carve's
                   pools, the bump benchmark) and print what they measure
  carve demo       the same
  carve replay [--alloc LIST|all] [--pool SIZE] [--strict] TRACE...
                   replay each trace through the allocators (all: first-fit,
                   next-fit, best-fit, ao-first-fit, buddy, buddy-header,
                   sizeclass; go, the Go heap, only when named: its figures
                   are sampled from this process's runtime statistics)
                   and print one table per trace
  carve gen NAME [-o FILE] [param=value...]
                   write a generated trace (connection, carving, bump,
                   zipf, phases) in carve's native format
  carve convert [-o FILE] TRACE
                   rewrite a trace (native, rep, valgrind, heaptrack,
                   mtrace, aosp; gzip or zstd) in carve's native format
  carve stats TRACE
                   sizes, lifetimes, peak live and Robson's bounds
  carve help       print this text

Exit codes: 0 ok, 1 a check failed, 2 bad usage.
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
	cmd := "demo"
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
	case "replay", "gen", "convert", "stats":
		return exitCode(map[string]func([]string, io.Writer) error{
			"replay": cmdReplay, "gen": cmdGen, "convert": cmdConvert, "stats": cmdStats,
		}[cmd](args, stdout), stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "carve: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
}
