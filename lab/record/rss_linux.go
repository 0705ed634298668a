package record

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// exitMaxRSS returns the largest resident set of an ended process, in
// bytes: wait4's ru_maxrss (in KiB on Linux), which is the larger of the
// process's own peak and those of the children it waited for.
func exitMaxRSS(ps *os.ProcessState) uint64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok && ru.Maxrss > 0 {
		return uint64(ru.Maxrss) << 10
	}
	return 0
}

// procfs returns the procReader of Linux's /proc.
func procfs() procReader { return procFS{} }

// procFS reads /proc.
type procFS struct{}

// status reads the lines "VmRSS:  <n> kB" and "VmHWM:  <n> kB" of
// /proc/PID/status.
func (procFS) status(pid int) (rss, hwm uint64, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, false
	}
	var haveRSS, haveHWM bool
	for line := range bytes.Lines(b) {
		switch {
		case bytes.HasPrefix(line, []byte("VmRSS:")):
			rss, haveRSS = statusKB(line[len("VmRSS:"):])
		case bytes.HasPrefix(line, []byte("VmHWM:")):
			hwm, haveHWM = statusKB(line[len("VmHWM:"):])
		}
	}
	return rss, hwm, haveRSS && haveHWM
}

// statusKB reads the value of a line of /proc/PID/status, "  <n> kB",
// in bytes.
func statusKB(v []byte) (uint64, bool) {
	n, ok := bytes.CutSuffix(bytes.TrimSpace(v), []byte(" kB"))
	if !ok {
		return 0, false
	}
	kb, err := strconv.ParseUint(string(bytes.TrimSpace(n)), 10, 64)
	if err != nil || kb > 1<<50 {
		return 0, false
	}
	return kb << 10, true
}

// children reads /proc/PID/task/*/children: the children each thread
// started.
func (procFS) children(pid int) []int {
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	var kids []int
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range bytes.Fields(b) {
			if c, err := strconv.Atoi(string(f)); err == nil && c > 0 {
				kids = append(kids, c)
			}
		}
	}
	return kids
}

// cmdline reads /proc/PID/cmdline.
func (procFS) cmdline(pid int) []byte {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return b
}

// now reads CLOCK_MONOTONIC, the clock of a Go execution trace's clock
// snapshots, and the wall clock.
func (procFS) now() (uint64, time.Time) {
	var ts unix.Timespec
	wall := time.Now()
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, wall // placed by the wall clock
	}
	return uint64(ts.Nano()), wall
}
