//go:build !linux

package libc_test

import (
	"runtime"
	"testing"
)

// pinThread locks the calling goroutine to its thread; binding the thread
// to a CPU is Linux's (see pin_linux_test.go).
func pinThread(*testing.B) { runtime.LockOSThread() }
