//go:build unix

package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOutputInterrupted interrupts (SIGINT) and terminates (SIGTERM)
// carve convert and carve report in a process of their own while they
// write: no temporary file may be left beside the output, and carve ends
// by the signal.
func TestOutputInterrupted(t *testing.T) {
	big := "gen:bump:n=200000000" // minutes of work
	for _, tt := range []struct {
		name string
		args []string
		sig  syscall.Signal
	}{
		{"convert/SIGINT", []string{"convert", "-o", "OUT", big}, syscall.SIGINT},
		{"convert/SIGTERM", []string{"convert", "-o", "OUT", big}, syscall.SIGTERM},
		{"report/SIGINT", []string{"report", "-o", "OUT", "--alloc", "best-fit", "--maps=false", big}, syscall.SIGINT},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			args := append([]string(nil), tt.args...)
			for i, a := range args {
				if a == "OUT" {
					args[i] = out
				}
			}
			cmd := exec.Command(os.Args[0], args...)
			cmd.Env = append(os.Environ(), asCarve+"=1")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			// Wait for the temporary file, and for convert's to grow.
			var tmp string
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				m, _ := filepath.Glob(filepath.Join(dir, ".out.carve-*"))
				if len(m) == 1 {
					if fi, err := os.Stat(m[0]); err == nil && (fi.Size() > 1<<20 || strings.HasPrefix(tt.name, "report")) {
						tmp = m[0]
						break
					}
				}
			}
			if tmp == "" {
				t.Fatalf("no temporary output appeared in %s; carve said %q", dir, stderr.String())
			}
			time.Sleep(100 * time.Millisecond)
			cmd.Process.Signal(tt.sig)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("carve still runs 10s after %v", tt.sig)
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("carve = %v, want it ended by %v", err, tt.sig)
			}
			if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != tt.sig {
				t.Errorf("carve ended with %v, want by %v", exit.ProcessState, tt.sig)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("%s holds %d files after %v (%s), want none", dir, len(ents), tt.sig, ents[0].Name())
			}
		})
	}
}

// TestStatsWriteError: carve stats (and carve record --recorders) whose
// standard output cannot be written (/dev/full) fails (exit 1, as a
// failed write of every command does) and says so.
func TestStatsWriteError(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("/dev/full: %v", err)
	}
	defer full.Close()
	for _, args := range [][]string{{"stats", "gen:connection:n=1000"}, {"record", "--recorders"}} {
		var stderr bytes.Buffer
		if code := run(args, full, &stderr); code != 1 || !strings.Contains(stderr.String(), "no space left on device") {
			t.Errorf("carve %v > /dev/full: exit %d, %q; want 1 and the write error", args, code, stderr.String())
		}
	}
}

// TestReportNoFile: carve report -o "" is bad usage, not a crash.
func TestReportNoFile(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"report", "-o", "", "gen:connection:n=100"}, new(bytes.Buffer), &stderr); code != 2 || !strings.Contains(stderr.String(), "want the report's FILE") {
		t.Errorf("carve report -o '': exit %d, %q; want 2 and a usage error", code, stderr.String())
	}
}
