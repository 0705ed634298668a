//go:build !linux

package record

import "os"

// procfs returns nil: the sampler needs Linux's /proc.
func procfs() procReader { return nil }

// exitMaxRSS returns 0: the sampler needs Linux.
func exitMaxRSS(*os.ProcessState) uint64 { return 0 }
