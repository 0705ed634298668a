//go:build unix

package selftrace_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/carvelab/carve/lab/selftrace"
)

// TestSignals ends a program that traces itself (testdata/sigwait) with
// SIGINT and SIGTERM: each time the trace is whole, and the program dies
// of the signal, as it would have without selftrace. The program runs
// without GODEBUG: its heap's events come from the setting Start makes.
func TestSignals(t *testing.T) {
	bin := buildSigwait(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "self.trace")
			cmd := exec.Command(bin)
			for _, e := range os.Environ() {
				if !strings.HasPrefix(e, "GODEBUG=") {
					cmd.Env = append(cmd.Env, e)
				}
			}
			cmd.Env = append(cmd.Env, selftrace.Env+"="+path)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
				t.Fatalf("the program printed %q (%v), want ready", line, err)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			err = cmd.Wait()
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if !ws.Signaled() || ws.Signal() != sig {
				t.Errorf("the program ended with %v (%v), want death by %v", cmd.ProcessState, err, sig)
			}
			n, allocs := readTrace(t, path)
			t.Logf("%d events; %d allocations of main.item", n, allocs["main.item"])
			if n == 0 || allocs["main.item"] < 1000 {
				t.Errorf("%d events, %d allocations of main.item; want events and at least the 1000 made before ready", n, allocs["main.item"])
			}
		})
	}
}
