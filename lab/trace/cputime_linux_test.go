package trace

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time the calling OS thread has used, which a
// busy machine's other processes do not inflate as they do wall time.
// Callers lock their goroutine to its thread.
func threadCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
