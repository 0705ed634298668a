//go:build unix

package lockfree_test

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime returns the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU starts measuring the process's CPU time; the function it
// returns reports it per operation as cpu-ns/op. On a machine that other
// work keeps busy, ns/op counts the time a benchmark waited for a core and
// cpu-ns/op does not; under contention it counts the retries of every
// goroutine.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() {
		b.ReportMetric(float64(cpuTime()-start)/float64(max(b.N, 1)), "cpu-ns/op")
	}
}
