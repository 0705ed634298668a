//go:build unix

package heap_test

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time the process has used, user and system
// (getrusage).
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
