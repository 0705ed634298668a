package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/traces"
)

func generatorList() string {
	var b strings.Builder
	for _, g := range trace.Generators() {
		fmt.Fprintf(&b, "  %s: %s\n", g.Name, g.Doc)
		for _, p := range g.Params {
			fmt.Fprintf(&b, "      %s=%s  %s\n", p.Name, strconv.FormatFloat(p.Default, 'f', -1, 64), p.Doc)
		}
	}
	return b.String()
}

func generatorNames() string {
	var names []string
	for _, g := range trace.Generators() {
		names = append(names, g.Name)
	}
	return strings.Join(names, ", ")
}

var genCommand = &command{
	name: "gen", args: "NAME [-o FILE] [param=value...]", interspersed: true,
	short: "write a generated trace in carve's native format",
	long:  "The generators and their parameters (a TRACE gen:NAME:param=value,... names the same trace):\n\n" + generatorList(),
	setup: func(fs *flag.FlagSet) func(*cli, []string) error {
		out := fs.String("o", "", "write the trace to `FILE` instead of standard output")
		return func(c *cli, args []string) error {
			if len(args) == 0 {
				return badUsage("want a generator name: %s", generatorNames())
			}
			name, kv := args[0], args[1:]
			g, ok := trace.Lookup(name)
			if !ok {
				var names []string
				for _, g := range trace.Generators() {
					names = append(names, g.Name)
				}
				return badUsage("unknown generator %q%s (want one of %s)", name, suggest(name, names), generatorNames())
			}
			params, err := g.ParseArgs(kv)
			if err != nil {
				return badUsage("%s: %v", name, err)
			}
			o, err := openOutput(*out, c.stdout)
			if err != nil {
				return err
			}
			return o.written(func(w io.Writer) error {
				tw := trace.NewWriter(w)
				if err := g.Generate(tw, params); err != nil {
					return err
				}
				return tw.Flush()
			})
		}
	},
}

// openTrace resolves and opens a TRACE argument.
func openTrace(arg string) (traces.Trace, trace.Source, io.Closer, error) {
	t, err := traces.Resolve(arg)
	if err != nil {
		return t, nil, nil, inputError{err}
	}
	src, closer, err := t.Open()
	if err != nil {
		return t, nil, nil, inputError{err}
	}
	return t, src, closer, nil
}

var convertCommand = &command{
	name: "convert", args: "[-o FILE] TRACE", interspersed: true,
	short: "rewrite a trace in carve's native format",
	long: "A TRACE is " + traces.Usage() + ". The objects' labels (a Go trace's types) and a Go trace's\n" +
		"samples of its heap are kept: the output is version 2 of the format when the trace has labels.",
	setup: func(fs *flag.FlagSet) func(*cli, []string) error {
		out := fs.String("o", "", "write the trace to `FILE` instead of standard output")
		return func(c *cli, args []string) error {
			if len(args) != 1 {
				return badUsage("want one TRACE, got %d arguments", len(args))
			}
			o, err := openOutput(*out, c.stdout, args[0])
			if err != nil {
				return err
			}
			_, src, closer, err := openTrace(args[0])
			if err != nil {
				o.finish(false)
				return err
			}
			defer closer.Close()
			return o.written(func(w io.Writer) error {
				tw := trace.NewWriter(w)
				if labels := trace.LabelsOf(src); labels != nil {
					if err := tw.SetLabels(labels); err != nil {
						return err
					}
				}
				if _, err := trace.Copy(tw, src); err != nil {
					return inputError{err}
				}
				return tw.Flush()
			})
		}
	},
}

var statsCommand = &command{
	name: "stats", args: "TRACE", interspersed: true,
	short: "describe a trace: sizes, lifetimes, peak live, Robson's bounds",
	long:  "A TRACE is " + traces.Usage() + ".",
	setup: func(fs *flag.FlagSet) func(*cli, []string) error {
		return func(c *cli, args []string) error {
			if len(args) != 1 {
				return badUsage("want one TRACE, got %d arguments", len(args))
			}
			t, src, closer, err := openTrace(args[0])
			if err != nil {
				return err
			}
			defer closer.Close()
			s, err := trace.SummarizeFrom(src)
			if err != nil {
				return inputError{err}
			}
			format := "generated"
			if r, ok := src.(interface{ Format() trace.Format }); ok {
				format = r.Format().String()
			}
			w := c.stdout
			fmt.Fprintf(w, "%s (%s): %d events\n", t.Label, format, s.Events)
			fmt.Fprintf(w, "requests: smallest %d B, largest %d B, %d of 0 B\n", s.Smallest, s.Largest, s.Zero)
			fmt.Fprintf(w, "peak live: %d B in %d objects (after event %d); live at the end: %d B in %d objects\n",
				s.PeakLive, s.PeakObjects, s.PeakAt, s.EndLive, s.EndObjects)
			ff, bf := s.Robson()
			fmt.Fprintf(w, "Robson's worst cases for this peak live M and n = largest/smallest: first fit ~ M log2 n = %.0f B, best fit ~ M n = %.0f B\n", ff, bf)
			fmt.Fprintf(w, "trace errors: %d frees and %d reallocs of objects not live, %d allocations of live ids\n",
				s.UnknownFrees, s.UnknownReallocs, s.LiveAllocs)
			fmt.Fprintln(w, "\nrequest sizes (bytes)          count   lifetimes (events)   count")
			for k := range s.Sizes {
				if s.Sizes[k] == 0 && s.Lifetimes[k] == 0 {
					continue
				}
				fmt.Fprintf(w, "%-28s %8d   %-18s %8d\n", bucket(k), s.Sizes[k], bucket(k), s.Lifetimes[k])
			}
			if len(s.Labels) > 0 {
				fmt.Fprintln(w, "\ntypes (labels) by bytes live at the peak")
				return s.WriteLabels(w, 20)
			}
			return nil
		}
	},
}

// bucket names power-of-two histogram bucket k: 0, or 2^(k-1) to 2^k - 1.
func bucket(k int) string {
	if k == 0 {
		return "0"
	}
	lo := uint64(1) << (k - 1)
	return fmt.Sprintf("%d-%d", lo, lo*2-1)
}
