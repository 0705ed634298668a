//go:build !unix

package replay

import "time"

// threadCPU cannot read a thread's CPU time here: the calls' time keeps
// the gaps the thread spent off the CPU.
func threadCPU() (time.Duration, bool) { return 0, false }
