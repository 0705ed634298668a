package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carvelab/carve/lab/rows"
)

// TestHelpEveryCommand walks the command table: carve help CMD, carve CMD
// -h and carve CMD --help exit 0 and print, on standard output, the
// command's synopsis and every flag with its default.
func TestHelpEveryCommand(t *testing.T) {
	for _, cmd := range commands {
		if cmd.hidden {
			continue
		}
		fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
		cmd.setup(fs)
		for _, args := range [][]string{{"help", cmd.name}, {cmd.name, "-h"}, {cmd.name, "--help"}} {
			var stdout, stderr bytes.Buffer
			if code := run(args, &stdout, &stderr); code != 0 || stderr.Len() != 0 {
				t.Errorf("carve %s: exit %d, stderr %q", strings.Join(args, " "), code, stderr.String())
				continue
			}
			out := stdout.String()
			wide(t, "carve "+strings.Join(args, " "), out)
			if !strings.HasPrefix(out, "usage: carve "+cmd.name) {
				t.Errorf("carve %s: %q, want the synopsis first", strings.Join(args, " "), out)
			}
			fs.VisitAll(func(f *flag.Flag) {
				if !strings.Contains(out, "--"+f.Name) {
					t.Errorf("carve %s does not list --%s:\n%s", strings.Join(args, " "), f.Name, out)
				}
				if d := f.DefValue; d != "" && d != "0" && d != "false" && d != "[]" && !strings.Contains(out, "(default ") {
					t.Errorf("carve %s does not say --%s's default %q", strings.Join(args, " "), f.Name, d)
				}
			})
		}
	}
	var stdout bytes.Buffer
	run([]string{"help"}, &stdout, &stdout)
	wide(t, "carve help", stdout.String())
	stdout.Reset()
	run([]string{"help", "replay"}, &stdout, &stdout)
	if !strings.Contains(stdout.String(), `--alloc LIST`) || !strings.Contains(stdout.String(), `(default "all")`) {
		t.Errorf("carve help replay does not show --alloc and its default:\n%s", stdout.String())
	}
}

// wide reports a line of out wider than the text output's width that
// could be broken (more than one word after its indent).
func wide(t *testing.T, what, out string) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if len(l) > maxWidth && len(strings.Fields(l)) > 1 {
			t.Errorf("%s: a line of %d characters, want at most %d:\n%s", what, len(l), maxWidth, l)
		}
	}
}

// TestUnknownCommandOrFlag: a typo gets one line naming it, a
// suggestion, the way to the help, and exit code 2.
func TestUnknownCommandOrFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"replpay", "x"}, []string{`unknown command "replpay"`, `did you mean "replay"?`, "carve help"}},
		{[]string{"help", "stast"}, []string{`unknown command "stast"`, `did you mean "stats"?`}},
		{[]string{"replay", "--allco", "best-fit", "x"}, []string{"-allco", `did you mean "--alloc"?`, "carve help replay"}},
		{[]string{"frobnicate"}, []string{`unknown command "frobnicate"`, "carve help"}},
		{[]string{"replay", "--alloc", "firstfit", "gen:bump:n=10"}, []string{`unknown allocator "firstfit"`, "first-fit", "glibc"}},
		{[]string{"replay", "--alloc", "pool", "gen:bump:n=10"}, []string{`"pool" is not a row`, "--pool SIZE"}},
		{[]string{"demo", "extra"}, []string{`unexpected argument "extra"`}},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		msg := stderr.String()
		if code != 2 || strings.Count(msg, "\n") > 3 || stdout.Len() != 0 {
			t.Errorf("carve %q: exit %d, %d lines on stderr, %d bytes on stdout; want 2, at most 3, none:\n%s", tc.args, code, strings.Count(msg, "\n"), stdout.Len(), msg)
		}
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("carve %q: %q lacks %q", tc.args, msg, w)
			}
		}
		if strings.Count(msg, "replay: replay") > 0 || strings.Count(msg, "Valid") > 0 || strings.Count(msg, "next-fit") > 1 {
			t.Errorf("carve %q names a thing twice: %q", tc.args, msg)
		}
	}
}

// TestVersion prints the module version, (devel) for a local build.
func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"version"}, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "carve ") {
		t.Errorf("carve version: exit %d, %q %q", code, stdout.String(), stderr.String())
	}
}

// TestEveryTraceForm: the commands that take a TRACE take every form of
// it: a file, a shipped name, gen:NAME[:k=v,...].
func TestEveryTraceForm(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"stats", "aosp-systemui"},
		{"stats", "gen:connection:n=100"},
		{"convert", "-o", dir + "/x.txt", "gen:connection:n=100"},
		{"stats", dir + "/x.txt"},
		{"convert", "-o", dir + "/y.txt", "aosp-systemui"},
		{"advise", "--max", "1", "gen:carving:n=200"},
		{"replay", "--alloc", "best-fit", "gen:carving:n=200", dir + "/x.txt"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 0 {
			t.Errorf("carve %q: exit %d: %s", args, code, stderr.String())
		}
	}
}

// TestStableIsStable: --stable output is byte-identical from run to run,
// in every format, every row included.
func TestStableIsStable(t *testing.T) {
	traces := []string{"gen:carving:n=2000", "aosp-systemui"}
	if raceEnabled {
		// Eight replays of the shipped trace through every row take
		// minutes under the race detector; the scenario's rows are the
		// same rows.
		traces = traces[:1]
	}
	for _, format := range []string{"text", "markdown", "csv", "json"} {
		var outs [2]string
		for i := range outs {
			var stdout, stderr bytes.Buffer
			if code := run(append([]string{"replay", "--stable", "--format", format}, traces...), &stdout, &stderr); code != 0 {
				t.Fatalf("%s: exit %d: %s", format, code, stderr.String())
			}
			outs[i] = stdout.String()
		}
		if outs[0] != outs[1] {
			t.Errorf("--stable --format %s differs between two runs:\n%s\n----\n%s", format, outs[0], outs[1])
		}
	}
}

// TestOutputsNeverDestroyInputs: a command that writes a file refuses an
// output that is its input (also through a link), leaves an existing
// output as it was when it fails, and writes nothing before its input is
// known to be readable.
func TestOutputsNeverDestroyInputs(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "t.txt")
	if code := run([]string{"gen", "connection", "n=20000", "-o", in}, io.Discard, io.Discard); code != 0 {
		t.Fatal("gen failed")
	}
	orig, _ := os.ReadFile(in)
	link := filepath.Join(dir, "l.txt")
	if err := os.Symlink(in, link); err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(dir, "keep.txt")
	os.WriteFile(keep, []byte("precious\n"), 0o600)
	bad := filepath.Join(dir, "bad.txt")
	os.WriteFile(bad, []byte("# carve trace v1\na 1 lots\n"), 0o644)
	for _, tc := range []struct {
		args []string
		file string
		want []byte
	}{
		{[]string{"convert", "-o", in, in}, in, orig},
		{[]string{"convert", "-o", link, in}, in, orig},
		{[]string{"convert", "-o", keep, bad}, keep, []byte("precious\n")},
		{[]string{"convert", "-o", keep, filepath.Join(dir, "nosuch")}, keep, []byte("precious\n")},
		{[]string{"gen", "nosuch", "-o", keep}, keep, []byte("precious\n")},
		{[]string{"report", "-o", keep, "--alloc", "best-fit", bad}, keep, []byte("precious\n")},
	} {
		if code := run(tc.args, io.Discard, io.Discard); code != 2 {
			t.Errorf("carve %q: exit %d, want 2", tc.args, code)
		}
		if got, _ := os.ReadFile(tc.file); !bytes.Equal(got, tc.want) {
			t.Errorf("carve %q changed %s (%d bytes, was %d)", tc.args, tc.file, len(got), len(tc.want))
		}
	}
	if fi, err := os.Stat(keep); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("keep.txt's mode: %v, %v", fi.Mode(), err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 4 {
		t.Errorf("the directory holds %d files, want the 4 made (no temporary left)", len(ents))
	}
	// Success replaces the output, keeping its mode.
	if code := run([]string{"convert", "-o", keep, in}, io.Discard, io.Discard); code != 0 {
		t.Fatal("convert failed")
	}
	if fi, _ := os.Stat(keep); fi.Mode().Perm() != 0o600 || fi.Size() != int64(len(orig)) {
		t.Errorf("after convert, keep.txt: mode %v, %d bytes; want 0600 and %d", fi.Mode(), fi.Size(), len(orig))
	}
}

// TestRowsNamedEverywhere: carve help replay lists every allocator of
// the tables, and the columns in the order a table prints them.
func TestRowsNamedEverywhere(t *testing.T) {
	var help bytes.Buffer
	run([]string{"help", "replay"}, &help, &help)
	at := 0
	for _, name := range rows.Names() {
		i := strings.Index(help.String()[at:], "\n  "+name+" ")
		if i < 0 {
			t.Errorf("carve help replay does not list %s after the rows before it", name)
			continue
		}
		at += i + 1
	}
	var table bytes.Buffer
	if code := run([]string{"replay", "--wide", "--alloc", "best-fit", "gen:connection:n=200", goTrace}, &table, &table); code != 0 {
		t.Fatalf("carve replay: %d: %s", code, table.String())
	}
	_, after, _ := strings.Cut(help.String(), "The columns")
	at = 0
	for _, c := range columns {
		i := strings.Index(after[at:], "\n  "+c.head+" ")
		if i < 0 {
			t.Errorf("carve help replay does not list the column %s after those before it", c.head)
			continue
		}
		at += i + 1
		if head := strings.Replace(c.head, "PHASE", "", 1); !strings.Contains(table.String(), head) {
			t.Errorf("no table of a scenario or a Go trace has the column %q:\n%s", head, table.String())
		}
	}
}
