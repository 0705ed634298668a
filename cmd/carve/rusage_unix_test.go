//go:build unix

package main

import (
	"os"
	"runtime"
	"syscall"
)

// maxRSS returns the most resident memory a waited-for process, or any
// process it waited for, took: getrusage's ru_maxrss (KiB on Linux, bytes
// on Darwin).
func maxRSS(ps *os.ProcessState) int64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	if runtime.GOOS == "darwin" {
		return int64(ru.Maxrss)
	}
	return int64(ru.Maxrss) << 10
}
