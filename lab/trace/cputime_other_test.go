//go:build !linux

package trace

import "time"

// threadCPU is not available here: benchmarks report wall time only.
func threadCPU() (time.Duration, bool) { return 0, false }
