//go:build linux

package main

import (
	"bytes"
	"crypto/sha1"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/carvelab/carve/lab/record"
)

// recordProgram is a C program for carve record's tests: it creates the
// file its first argument names (so a test can tell it ran), makes 7
// mallocs, and ends as its second argument says (kill: SIGKILL, sent to
// itself; sleep: it sleeps a minute first).
const recordProgram = `#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	if (argc > 1)
		close(open(argv[1], O_WRONLY | O_CREAT, 0644));
	for (int i = 0; i < 7; i++) {
		char *p = malloc(23456);
		memset(p, i, 23456);
	}
	if (argc > 2 && strcmp(argv[2], "kill") == 0)
		kill(getpid(), SIGKILL);
	if (argc > 2 && strcmp(argv[2], "sleep") == 0)
		sleep(60);
	return 0;
}
`

// buildRecordProgram compiles recordProgram into dir as "prog".
func buildRecordProgram(t *testing.T, dir string) string {
	t.Helper()
	if err := record.Available(record.Default); err != nil {
		needReal(t, "the carve recorder", err.Error())
	}
	src := filepath.Join(dir, "prog.c")
	if err := os.WriteFile(src, []byte(recordProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(dir, "prog")
	if out, err := exec.Command("cc", "-O0", "-o", prog, src).CombinedOutput(); err != nil {
		needReal(t, "cc", string(out))
	}
	return prog
}

func sha1Of(t *testing.T, path string) [20]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha1.Sum(b)
}

// isTrace reports whether the file at path holds a trace in carve's
// native format.
func isTrace(path string) bool {
	b, err := os.ReadFile(path)
	return err == nil && bytes.HasPrefix(b, []byte("# carve"))
}

// TestRecordOutput: carve record writes its trace by the path every
// command's output takes. A device is written in place and stays a
// device; the program being recorded, or a file it is given, is refused
// (and left as it was) before anything runs, and so is a directory; an
// existing file keeps its mode; a symbolic link stays a link, and the
// file it names gets the trace.
func TestRecordOutput(t *testing.T) {
	dir := t.TempDir()
	prog := buildRecordProgram(t, dir)
	t.Chdir(dir)
	ran := filepath.Join(dir, "ran")
	progSum := sha1Of(t, prog)
	run1 := func(args ...string) (int, string) {
		t.Helper()
		os.Remove(ran)
		var stdout, stderr bytes.Buffer
		code := run(args, &stdout, &stderr)
		return code, stderr.String()
	}
	mustNotRun := func(what string) {
		t.Helper()
		if _, err := os.Stat(ran); err == nil {
			t.Errorf("%s: the program ran", what)
		}
	}

	// The program itself, by its path and as the PATH finds it, and a
	// file it is given.
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	given := filepath.Join(dir, "input.txt")
	os.WriteFile(given, []byte("the program's input\n"), 0o644)
	for _, args := range [][]string{
		{"record", "-o", "prog", "--", "./prog", ran},
		{"record", "-o", prog, "--", "prog", ran},
		{"record", "-o", given, "--", "./prog", ran, given},
	} {
		code, stderr := run1(args...)
		if code != 2 || !strings.Contains(stderr, "the output is the input") {
			t.Errorf("%v: exit %d, %q; want 2 and the output is the input", args, code, stderr)
		}
		mustNotRun(strings.Join(args, " "))
	}
	if sha1Of(t, prog) != progSum {
		t.Errorf("the program's file changed")
	}
	if b, _ := os.ReadFile(given); string(b) != "the program's input\n" {
		t.Errorf("the program's input holds %q", b)
	}

	// A directory: refused before the program runs.
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	if code, stderr := run1("record", "-o", sub, "--", "./prog", ran); code != 2 || !strings.Contains(stderr, "is a directory") {
		t.Errorf("-o DIR: exit %d, %q; want 2 and is a directory", code, stderr)
	}
	mustNotRun("-o DIR")

	// An existing file keeps its mode; a link stays a link.
	old := filepath.Join(dir, "old.trace")
	os.WriteFile(old, []byte("old\n"), 0o644)
	os.Chmod(old, 0o644)
	link := filepath.Join(dir, "link.trace")
	os.Symlink("old.trace", link)
	for _, out := range []string{old, link} {
		if code, stderr := run1("record", "-o", out, "--", "./prog", ran); code != 0 {
			t.Fatalf("-o %s: exit %d, %q", out, code, stderr)
		}
		fi, err := os.Stat(old)
		if err != nil || fi.Mode().Perm() != 0o644 || !isTrace(old) {
			t.Errorf("-o %s: %s is %v (%v), a trace %v; want mode 0644 and a trace", out, old, fi.Mode(), err, isTrace(old))
		}
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link is now %v (%v), want a symbolic link", fi.Mode(), err)
	}

	// Devices, as root: nodes of its own, as /dev/null and /dev/full are.
	if os.Getuid() != 0 {
		t.Skip("the device nodes need root (mknod)")
	}
	null, full := filepath.Join(dir, "null"), filepath.Join(dir, "full")
	if err := syscall.Mknod(null, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		t.Skipf("mknod: %v", err)
	}
	if err := syscall.Mknod(full, syscall.S_IFCHR|0o666, 1<<8|7); err != nil {
		t.Skipf("mknod: %v", err)
	}
	for _, tt := range []struct {
		dev  string
		code int
	}{{null, 0}, {full, 1}} {
		code, stderr := run1("record", "-o", tt.dev, "--", "./prog", ran)
		if code != tt.code {
			t.Errorf("-o %s: exit %d, %q; want %d", tt.dev, code, stderr, tt.code)
		}
		if fi, err := os.Lstat(tt.dev); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
			t.Errorf("-o %s: it is now %v (%v), want a character device", tt.dev, fi.Mode(), err)
		}
	}
}

// TestRecordMessages: what carve record says and its exit code, for a
// program that cannot run (2: bad usage), a program killed after a few
// mallocs (its trace is written), a go test that does not build (no
// false diagnosis), --seconds out of range and a --from URL with a
// password (never printed).
func TestRecordMessages(t *testing.T) {
	dir := t.TempDir()
	prog := buildRecordProgram(t, dir)
	notExec := filepath.Join(dir, "notexec")
	os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644)
	out := filepath.Join(dir, "out.trace")
	for _, tt := range []struct {
		args   []string
		code   int
		want   string
		unwant string
	}{
		{[]string{"record", "-o", out, "--", dir}, 2, "is a directory", ""},
		{[]string{"record", "-o", out, "--", notExec}, 2, "not an executable file", ""},
		{[]string{"record", "-o", out, "--", prog, filepath.Join(dir, "ran"), "kill"}, 1, "signal: killed; its trace until then is written", "no allocation"},
		{[]string{"record", "-o", out, "--", "go", "test", "../../lab/record/testdata/nobuild"}, 2, "go test wrote no execution trace", "pure-Go"},
		{[]string{"record", "-o", out, "--from", "127.0.0.1:1", "--seconds", "NaN"}, 2, "--seconds NaN: want a duration above 0, up to 86400", ""},
		{[]string{"record", "-o", out, "--from", "127.0.0.1:1", "--seconds", "+Inf"}, 2, "--seconds +Inf: want", ""},
		{[]string{"record", "-o", out, "--from", "127.0.0.1:1", "--seconds", "1e12"}, 2, "--seconds 1e+12: want", ""},
		{[]string{"record", "-o", out, "--from", "http://user:s3cr3t@127.0.0.1:1", "--seconds", "0.1"}, 2, "user:xxxxx@127.0.0.1:1", "s3cr3t"},
	} {
		if tt.args[3] == "go" {
			if _, err := exec.LookPath("go"); err != nil {
				needReal(t, "go", err.Error())
			}
		}
		os.Remove(out)
		var stdout, stderr bytes.Buffer
		code := run(tt.args, &stdout, &stderr)
		if code != tt.code || !strings.Contains(stderr.String(), tt.want) || tt.unwant != "" && strings.Contains(stderr.String(), tt.unwant) {
			t.Errorf("%v: exit %d, %q; want %d, saying %q and not %q", tt.args, code, stderr.String(), tt.code, tt.want, tt.unwant)
		}
		if _, err := os.Stat(out); (err == nil) != (tt.code == 1) {
			t.Errorf("%v: the trace written: %v, want %v", tt.args, err == nil, tt.code == 1)
		}
	}
}

// TestRecordInterrupted interrupts carve record (SIGINT to carve alone)
// while the program sleeps after its mallocs: the program is
// interrupted, and its trace until then is written.
func TestRecordInterrupted(t *testing.T) {
	dir := t.TempDir()
	prog := buildRecordProgram(t, dir)
	ran, out := filepath.Join(dir, "ran"), filepath.Join(dir, "out.trace")
	cmd := exec.Command(os.Args[0], "record", "-o", out, "--", prog, ran, "sleep")
	cmd.Env = append(os.Environ(), asCarve+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(ran); err == nil {
			break
		}
	}
	time.Sleep(200 * time.Millisecond) // past the mallocs
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	if cmd.ProcessState.ExitCode() != 1 || !isTrace(out) || !strings.Contains(stderr.String(), "7 events") {
		t.Errorf("carve record, interrupted: %v, a trace written %v, %q; want exit 1, the trace of 7 events", err, isTrace(out), stderr.String())
	}
}

// TestRecordRSS: carve record prints the peak RSS of the recorded C
// program, the one sample its trace holds, or why a trace has none.
func TestRecordRSS(t *testing.T) {
	dir := t.TempDir()
	prog := buildRecordProgram(t, dir)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"record", "-o", filepath.Join(dir, "out.trace"), "--", prog}, &stdout, &stderr); code != 0 {
		t.Fatalf("carve record = %d: %s", code, stderr.String())
	}
	want := "of the program, the recorder's buffers included (VmHWM, sampled every 100 ms: "
	if !strings.Contains(stderr.String(), "carve record: peak RSS ") || !strings.Contains(stderr.String(), want) ||
		!strings.Contains(stderr.String(), "; the trace holds the peak only)") {
		t.Errorf("carve record said %q, want the peak RSS %s", stderr.String(), want)
	}
	stderr.Reset()
	printRSS(&cli{stderr: &stderr}, record.Result{NoRSS: "not on Linux"})
	if got := stderr.String(); got != "carve record: no samples of the RSS in the trace: not on Linux\n" {
		t.Errorf("printRSS of none = %q", got)
	}
}
