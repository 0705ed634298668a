package libc_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/carvelab/carve/lab/libc"
)

// TestReplayerOffCPU stops the C replayer's process now and then while it
// replays calls that take most of its time (calloc of 64 KiB clears them,
// and nothing is touched outside the calls): the reports count the time
// stopped in a call as off the CPU, and keep it out of Nanos.
func TestReplayerOffCPU(t *testing.T) {
	needReplayer(t)
	r := startReplayer(t, "", false)
	const stops, stopped = 20, 5 * time.Millisecond
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range stops {
			time.Sleep(10 * time.Millisecond)
			syscall.Kill(r.Pid(), syscall.SIGSTOP)
			time.Sleep(stopped)
			syscall.Kill(r.Pid(), syscall.SIGCONT)
		}
	}()
	var ops []libc.Op
	for range 500 {
		ops = append(ops, calloc(0, 64<<10), free(0))
	}
	var off, nanos int64
	start := time.Now()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		rep, err := r.Run(ops)
		if err != nil {
			t.Fatal(err)
		}
		off, nanos = off+rep.OffCPU, nanos+rep.Nanos
	}
	wall := time.Since(start)
	// Most of the replayer's time is in the calls, so most of the 100 ms
	// stopped is; a quarter of it is plenty to show that it is reported
	// (a loaded machine adds its preemptions).
	if total := stops * stopped; time.Duration(off) < total/4 {
		t.Errorf("off the CPU %v in the calls, want about the %v the replayer was stopped", time.Duration(off), total)
	}
	if time.Duration(nanos)+time.Duration(off) > wall {
		t.Errorf("in the calls %v and off the CPU %v, more than the %v the replay took", time.Duration(nanos), time.Duration(off), wall)
	}
	t.Logf("in the calls %v, off the CPU %v, replay %v", time.Duration(nanos), time.Duration(off), wall)
}
