package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/carvelab/carve/lab/trace"
)

// usageError is bad usage: exit code 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func badUsage(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...)}
}

// output opens the -o file, or returns standard output.
func output(path string, stdout io.Writer) (io.Writer, func() error, error) {
	if path == "" {
		return stdout, func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	return f, f.Close, nil
}

// cmdGen writes a generated trace: carve gen NAME [-o FILE] [param=value...].
func cmdGen(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return badUsage("carve gen: want a generator name: %s", generatorNames())
	}
	name := args[0]
	// -o may come before or after the name=value parameters.
	var out string
	var kv []string
	for i := 1; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-o" || a == "--o":
			if i+1 == len(args) {
				return badUsage("carve gen: -o wants a FILE")
			}
			out = args[i+1]
			i++
		case strings.HasPrefix(a, "-o=") || strings.HasPrefix(a, "--o="):
			out = a[strings.Index(a, "=")+1:]
		default:
			kv = append(kv, a)
		}
	}
	g, ok := trace.Lookup(name)
	if !ok {
		return badUsage("carve gen: unknown generator %q (want one of %s)", name, generatorNames())
	}
	params, err := g.ParseArgs(kv)
	if err != nil {
		return badUsage("carve gen %s: %v", name, err)
	}
	w, done, err := output(out, stdout)
	if err != nil {
		return err
	}
	tw := trace.NewWriter(w)
	if err := g.Generate(tw, params); err != nil {
		done()
		return err
	}
	if err := tw.Flush(); err != nil {
		done()
		return err
	}
	return done()
}

func generatorNames() string {
	var names []string
	for _, g := range trace.Generators() {
		names = append(names, g.Name)
	}
	return strings.Join(names, ", ")
}

// cmdConvert rewrites any trace in carve's native format: carve convert
// [-o FILE] TRACE.
func cmdConvert(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("convert", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("o", "", "write the trace to `FILE` instead of standard output")
	if err := fs.Parse(args); err != nil {
		return badUsage("carve convert: %v", err)
	}
	if fs.NArg() != 1 {
		return badUsage("carve convert: want one TRACE, got %d arguments", fs.NArg())
	}
	r, err := trace.Open(fs.Arg(0))
	if err != nil {
		return inputError{err}
	}
	defer r.Close()
	w, done, err := output(*out, stdout)
	if err != nil {
		return err
	}
	tw := trace.NewWriter(w)
	batch := make([]trace.Event, 4096)
	for {
		n, rerr := r.Read(batch)
		for _, e := range batch[:n] {
			if err := tw.Write(e); err != nil {
				done()
				return err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			done()
			return inputError{rerr}
		}
	}
	if err := tw.Flush(); err != nil {
		done()
		return err
	}
	return done()
}

// inputError is unreadable input: exit code 2.
type inputError struct{ err error }

func (e inputError) Error() string { return e.err.Error() }
func (e inputError) Unwrap() error { return e.err }

// cmdStats describes a trace: carve stats TRACE.
func cmdStats(args []string, stdout io.Writer) error {
	if len(args) != 1 {
		return badUsage("carve stats: want one TRACE, got %d arguments", len(args))
	}
	r, err := trace.Open(args[0])
	if err != nil {
		return inputError{err}
	}
	defer r.Close()
	s, err := trace.Summarize(r)
	if err != nil {
		return inputError{err}
	}
	fmt.Fprintf(stdout, "%s (%s): %d events\n", args[0], r.Format(), s.Events)
	fmt.Fprintf(stdout, "requests: smallest %d B, largest %d B, %d of 0 B\n", s.Smallest, s.Largest, s.Zero)
	fmt.Fprintf(stdout, "peak live: %d B in %d objects (after event %d); live at the end: %d B in %d objects\n",
		s.PeakLive, s.PeakObjects, s.PeakAt, s.EndLive, s.EndObjects)
	ff, bf := s.Robson()
	fmt.Fprintf(stdout, "Robson's worst cases for this peak live M and n = largest/smallest: first fit ~ M log2 n = %.0f B, best fit ~ M n = %.0f B\n", ff, bf)
	fmt.Fprintf(stdout, "trace errors: %d frees and %d reallocs of objects not live, %d allocations of live ids\n",
		s.UnknownFrees, s.UnknownReallocs, s.LiveAllocs)
	fmt.Fprintln(stdout, "\nrequest sizes (bytes)          count   lifetimes (events)   count")
	for k := range s.Sizes {
		if s.Sizes[k] == 0 && s.Lifetimes[k] == 0 {
			continue
		}
		fmt.Fprintf(stdout, "%-28s %8d   %-18s %8d\n", bucket(k), s.Sizes[k], bucket(k), s.Lifetimes[k])
	}
	return nil
}

// bucket names power-of-two histogram bucket k: 0, or 2^(k-1) to 2^k - 1.
func bucket(k int) string {
	if k == 0 {
		return "0"
	}
	lo := uint64(1) << (k - 1)
	return fmt.Sprintf("%d-%d", lo, lo*2-1)
}

// checkFailed is a correctness violation or a strict trace error: exit
// code 1.
type checkFailed struct{ err error }

func (e checkFailed) Error() string { return e.err.Error() }
func (e checkFailed) Unwrap() error { return e.err }
