// Command carve is carve's fragmentation lab: it replays allocation traces
// through carve's allocators and the real mallocs and prints how far each
// heap grows beyond live memory. Run with no arguments, it runs the lab on
// its embedded defaults; carve help lists the commands, and carve help
// COMMAND (or carve COMMAND -h) describes one with its flags.
//
// Exit codes: 0 ok, 1 a check failed, 2 bad usage or unreadable input.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/carvelab/carve/internal/text"
	"github.com/carvelab/carve/lab/rows"
	"github.com/carvelab/carve/lab/scenario"
)

// A command is one entry of the command table, which drives dispatch,
// carve help, carve help CMD and carve CMD -h.
type command struct {
	name  string
	args  string // what follows the name in the synopsis
	short string // one line, for the list
	long  string // paragraphs, for carve help CMD
	// interspersed lets flags stand anywhere among the arguments (carve
	// replay TRACE --alloc buddy); otherwise they come first, and the
	// first other argument ends them.
	interspersed bool
	hidden       bool
	// setup registers the command's flags and returns what runs it.
	setup func(fs *flag.FlagSet) func(c *cli, args []string) error
}

// cli is what a command runs with.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	args           []string // the arguments after the command's name, as given
}

// commands is the command table, in the order carve help lists them.
var commands []*command

func init() {
	commands = []*command{
		labCommand, replayCommand, reportCommand, adviseCommand, diffCommand, scenarioCommand,
		recordCommand, genCommand, convertCommand, statsCommand, demoCommand, versionCommand,
		{name: rows.ChildCommand, hidden: true, short: "the child side of a row (internal)",
			setup: func(*flag.FlagSet) func(*cli, []string) error {
				return func(c *cli, _ []string) error { return rows.ServeChild(c.stdin, c.stdout) }
			}},
	}
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command line, separated from main for tests: it returns the
// exit code.
func run(args []string, stdout, stderr io.Writer) int {
	c := &cli{stdin: os.Stdin, stdout: stdout, stderr: stderr}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") && !slices.Contains([]string{"-h", "-help", "--help"}, args[0]) {
		args = append([]string{"lab"}, args...) // carve --n 100000: the lab's flags
	}
	name, args := args[0], args[1:]
	c.args = args
	switch name {
	case "help", "-h", "-help", "--help":
		return c.help(args)
	}
	cmd := lookup(name)
	if cmd == nil {
		fmt.Fprintf(stderr, "carve: unknown command %q%s; run 'carve help'\n", name, suggest(name, visible()))
		return 2
	}
	fs := flag.NewFlagSet("carve "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	runCmd := cmd.setup(fs)
	rest, err := parseFlags(fs, args, cmd.interspersed)
	switch {
	case errors.Is(err, flag.ErrHelp):
		cmd.usage(stdout, fs)
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "carve %s: %v%s; run 'carve help %s'\n", name, err, suggestFlag(err, fs), name)
		return 2
	}
	return exitCode(cmd, runCmd(c, rest), stderr)
}

// The errors a command returns that say which exit code it gets.
type (
	// usageError is bad usage: exit code 2, and a pointer to the help.
	usageError struct{ msg string }
	// inputError is unreadable input: exit code 2.
	inputError struct{ err error }
	// checkFailed is a correctness violation or a strict trace error:
	// exit code 1.
	checkFailed struct{ err error }
)

func (e usageError) Error() string  { return e.msg }
func (e inputError) Error() string  { return e.err.Error() }
func (e inputError) Unwrap() error  { return e.err }
func (e checkFailed) Error() string { return e.err.Error() }
func (e checkFailed) Unwrap() error { return e.err }

func badUsage(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...)}
}

// classify wraps an error a replay stopped with in the type its exit code
// comes from: an unreadable trace (2), a failed check (1).
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, rows.ErrCheck) || rows.ErrorKind(err) == rows.KindCheck:
		return checkFailed{err}
	case rows.ErrorKind(err) == rows.KindInput:
		return inputError{err}
	}
	return err
}

// exitCode prints err, naming the command once, and maps it to the exit
// codes: 0 ok, 1 a check failed (or carve itself failed), 2 bad usage or
// unreadable input.
func exitCode(cmd *command, err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, cmd.name+": "); ok {
		msg = rest // a package that prefixes its errors with the command's name
	}
	fmt.Fprintf(stderr, "carve %s: %s\n", cmd.name, msg)
	var u usageError
	var in inputError
	switch {
	case errors.As(err, &u):
		fmt.Fprintf(stderr, "run 'carve help %s'\n", cmd.name)
		return 2
	case errors.As(err, &in):
		return 2
	}
	return 1
}

// parseFlags parses fs's flags among args and returns the other arguments
// in order. With interspersed, flags may stand anywhere; otherwise they
// come first. "--" ends the flags either way.
func parseFlags(fs *flag.FlagSet, args []string, interspersed bool) ([]string, error) {
	if !interspersed {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		return fs.Args(), nil
	}
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return rest, nil
		}
		if args[0] == "--" {
			return append(rest, args[1:]...), nil
		}
		rest = append(rest, args[0])
		args = args[1:]
	}
}

func visible() []string {
	var names []string
	for _, c := range commands {
		if !c.hidden {
			names = append(names, c.name)
		}
	}
	return names
}

// help prints the list of commands, or one command's help: carve help
// [COMMAND].
func (c *cli) help(args []string) int {
	if len(args) == 0 {
		var b strings.Builder
		fmt.Fprint(&b, "carve: memory allocators outside the Go heap, and a lab for heap fragmentation\n\n")
		fmt.Fprint(&b, "usage: carve [COMMAND] [flags] [arguments]\n\nWith no command, carve runs the lab on its embedded defaults.\n\ncommands:\n")
		for _, cmd := range commands {
			if !cmd.hidden {
				fmt.Fprintf(&b, "  %-9s  %s\n", cmd.name, cmd.short)
			}
		}
		fmt.Fprint(&b, "\nA TRACE is a file (gzip or zstd or not) in one of these formats:\n"+formatsHelp()+
			"or a shipped trace (aosp-systemui), or gen:NAME[:param=value,...] (carve help\n"+
			"gen lists the generators).\n\n"+
			"Run 'carve help COMMAND' (or carve COMMAND -h) for a command's flags.\n"+
			"Exit codes: 0 ok, 1 a check failed, 2 bad usage or unreadable input.\n")
		fmt.Fprint(c.stdout, text.Lines(b.String(), maxWidth))
		return 0
	}
	cmd := lookup(args[0])
	if cmd == nil || cmd.hidden {
		fmt.Fprintf(c.stderr, "carve help: unknown command %q%s; run 'carve help'\n", args[0], suggest(args[0], visible()))
		return 2
	}
	fs := flag.NewFlagSet("carve "+cmd.name, flag.ContinueOnError)
	cmd.setup(fs)
	cmd.usage(c.stdout, fs)
	return 0
}

// usage prints a command's synopsis, its description and every flag with
// its default.
func (cmd *command) usage(out io.Writer, fs *flag.FlagSet) {
	w := new(strings.Builder)
	defer func() { fmt.Fprint(out, text.Lines(w.String(), maxWidth)) }()
	fmt.Fprintf(w, "usage: carve %s %s\n\n%s\n", cmd.name, cmd.args, cmd.short)
	if cmd.long != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(cmd.long))
	}
	var lines [][2]string
	width := 0
	fs.VisitAll(func(f *flag.Flag) {
		name, use := flag.UnquoteUsage(f)
		left := "--" + f.Name
		if name != "" {
			left += " " + name
		}
		if def := f.DefValue; def != "" && def != "0" && def != "false" && def != "[]" {
			b, isBool := f.Value.(interface{ IsBoolFlag() bool })
			if _, err := strconv.ParseFloat(def, 64); err != nil && !(isBool && b.IsBoolFlag()) {
				def = strconv.Quote(def)
			}
			use += " (default " + def + ")"
		}
		lines = append(lines, [2]string{left, use})
		width = max(width, len(left))
	})
	if len(lines) > 0 {
		fmt.Fprint(w, "\nflags:\n")
		// Each flag's text wrapped beside the names, to the width of the
		// text output.
		for _, l := range lines {
			for i, part := range text.Wrap(l[1], max(maxWidth-width-4, 40)) {
				if i > 0 {
					l[0] = ""
				}
				fmt.Fprintf(w, "  %-*s  %s\n", width, l[0], part)
			}
		}
	}
}

// suggest returns ` (did you mean "X"?)` for the name of names closest to
// s, if one is close enough, or "".
func suggest(s string, names []string) string {
	best, dist := "", 3
	for _, n := range names {
		if d := distance(s, n); d < dist || d == dist && best == "" && strings.HasPrefix(n, s) {
			best, dist = n, d
		}
	}
	if best == "" || dist > max(1, len(s)*2/5) {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// suggestFlag returns a suggestion for a flag that fs does not define.
func suggestFlag(err error, fs *flag.FlagSet) string {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: ")
	if !ok {
		return ""
	}
	name = strings.TrimLeft(name, "-")
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if s := suggest(name, names); s != "" {
		return strings.Replace(s, `"`, `"--`, 1)
	}
	return ""
}

// distance is the edit distance between a and b: insertions, deletions,
// substitutions and transpositions of neighbours (the typos of a hand on
// a keyboard) count one each.
func distance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// version prints the module version and VCS revision of this build.
var versionCommand = &command{
	name: "version", args: "", short: "print carve's version and the revision it was built from",
	setup: func(*flag.FlagSet) func(*cli, []string) error {
		return func(c *cli, args []string) error {
			if len(args) > 0 {
				return badUsage("unexpected argument %q", args[0])
			}
			fmt.Fprintln(c.stdout, versionString())
			return nil
		}
	},
}

func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "carve (devel)"
	}
	s := "carve " + bi.Main.Version
	if s == "carve " {
		s = "carve (devel)"
	}
	var rev, when string
	modified := false
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.time":
			when = kv.Value
		case "vcs.modified":
			modified = kv.Value == "true"
		}
	}
	if rev != "" {
		s += " " + rev[:min(12, len(rev))]
		if when != "" {
			s += " " + when
		}
		if modified {
			s += " (modified)"
		}
	}
	return s + " " + bi.GoVersion
}

// demoCommand runs the pool and arena demonstrations.
var demoCommand = &command{
	name: "demo", args: "", short: "the pool and arena demonstrations: pool.cpp, the stride, the connection scenario on pools, the bump arena",
	setup: func(*flag.FlagSet) func(*cli, []string) error {
		return func(c *cli, args []string) error {
			if len(args) > 0 {
				return badUsage("unexpected argument %q", args[0])
			}
			w := &fitWriter{w: c.stdout}
			err := scenario.Demo(w, scenario.DefaultDemo)
			return classify(errors.Join(err, w.flush()))
		}
	},
}
