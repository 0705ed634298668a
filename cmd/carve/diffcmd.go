package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/carvelab/carve/internal/text"
	"github.com/carvelab/carve/lab/diff"
	"github.com/carvelab/carve/lab/traces"
)

var diffCommand = &command{
	name: "diff", args: "[--format json] A B", interspersed: true,
	short: "compare two traces of a program, before and after a change, or two carve replay --format json files",
	long: "Two traces (typically two carve record -- go test ... of the program, before and after a\n" +
		"change) are each read once, their frees placed as carve stats places them. carve diff prints\n" +
		"A -> B, with the change and its percent: peak live, the peak marked heap (of a trace that\n" +
		"records the program's collections), the program's peak RSS (VmHWM, where carve record sampled\n" +
		"it in both), and the allocations; then, per type (by its Go name, as carve stats names it),\n" +
		"the bytes live at the trace's peak, the largest changes first (" + fmt.Sprint(diff.TopGroups) + " types, and a line for\n" +
		"the rest; a type in one trace only is new or gone); per allocation site likewise, where the\n" +
		"traces' labels carry sites (carve record of a go test: carve stats --by site); then a verdict.\n\n" +
		strings.Join(text.Wrap(diff.VerdictRule, 96), "\n") +
		"\n\nTwo JSON files of carve replay --format json (schema " + diff.ReplaySchemaPrefix + "...) are compared\n" +
		"row by row: peak RSS and peak live A -> B for each row matched by trace and allocator (by\n" +
		"allocator alone when each file is of one trace, under two names), then the rows only in one.\n\n" +
		"The kind is told by content: a file whose first character other than white space is '{' is\n" +
		"JSON, anything else a TRACE; A and B must be of one kind. Neither is written.\n" +
		"A TRACE is " + traces.Usage() + ".",
	setup: func(fs *flag.FlagSet) func(*cli, []string) error {
		format := fs.String("format", textOrJSON[0], "output `FORMAT`: "+text.Or(textOrJSON)+" (schema "+diff.Schema+", docs/json.md)")
		var tf traceFlags
		tf.register(fs)
		tf.registerFrees(fs)
		return func(c *cli, args []string) error {
			if len(args) != 2 {
				return badUsage("want two arguments, A and B, got %d", len(args))
			}
			if err := checkFormat(*format, textOrJSON); err != nil {
				return err
			}
			a, b := args[0], args[1]
			var d interface{ WriteText(io.Writer) error }
			switch ra, rb := diff.IsReplay(a), diff.IsReplay(b); {
			case ra != rb:
				j, t := a, b
				if rb {
					j, t = b, a
				}
				if _, err := tf.resolve(t); err != nil {
					return inputError{err} // not a mix: a file missing
				}
				return inputError{fmt.Errorf("%s is JSON (a carve replay table) and %s a trace: compare two of a kind", j, t)}
			case ra:
				ta, err := diff.ReadReplay(a)
				if err != nil {
					return inputError{err}
				}
				tb, err := diff.ReadReplay(b)
				if err != nil {
					return inputError{err}
				}
				d = diff.CompareReplays(ta, tb)
			default:
				ta, err := readDiffTrace(&tf, a)
				if err != nil {
					return err
				}
				tb, err := readDiffTrace(&tf, b)
				if err != nil {
					return err
				}
				d = diff.Compare(ta, tb)
			}
			o, err := openOutput("", c.stdout)
			if err != nil {
				return err
			}
			return o.written(func(w io.Writer) error {
				if *format == "json" {
					enc := json.NewEncoder(w)
					enc.SetIndent("", "  ")
					return enc.Encode(d)
				}
				return d.WriteText(w)
			})
		}
	},
}

// readDiffTrace resolves and reads one trace of carve diff.
func readDiffTrace(tf *traceFlags, arg string) (diff.Trace, error) {
	t, err := tf.resolve(arg)
	if err != nil {
		return diff.Trace{}, inputError{err}
	}
	d, err := diff.Read(t)
	if err != nil {
		return diff.Trace{}, inputError{err}
	}
	return d, nil
}
