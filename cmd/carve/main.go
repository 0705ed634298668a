// Command carve runs carve's allocators on the seeds' experiments and
// prints what they measure.
//
// Usage:
//
//	carve            the demonstrations on their embedded defaults
//	carve demo       the same
//	carve help       this text
//
// Exit codes: 0 ok, 1 a check failed, 2 bad usage.
package main

import (
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
  carve help       print this text

Exit codes: 0 ok, 1 a check failed, 2 bad usage.
`

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
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "carve: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
}
