//go:build !unix

package heap_test

import (
	"errors"
	"time"
)

// processCPU reports that the process's CPU time is not measured here.
func processCPU() (time.Duration, error) {
	return 0, errors.ErrUnsupported
}
