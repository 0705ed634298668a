//go:build unix

package churn

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time the process has used in user and in
// system mode, and the page faults it took that needed no I/O
// (getrusage).
func processCPU() (user, sys time.Duration, faults int64, err error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0, 0, err
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano()), int64(ru.Minflt), nil
}
