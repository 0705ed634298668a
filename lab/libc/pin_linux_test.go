package libc_test

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// pinThread locks the calling goroutine to its thread and binds the thread
// to one CPU, so that the kernel cannot move it to the other CPU between
// two batches, away from the cache that holds the malloc heap's hot lines.
// The goroutine must end still locked: the thread, pinned, then exits with
// it and no other goroutine inherits the binding.
func pinThread(b *testing.B) {
	runtime.LockOSThread()
	var all, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		b.Logf("not pinned: %v", err)
		return
	}
	for cpu := range len(all) * 64 {
		if all.IsSet(cpu) {
			one.Zero()
			one.Set(cpu) // the last CPU allowed: CPU 0 takes the most interrupts
		}
	}
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		b.Logf("not pinned: %v", err)
	}
}
