//go:build !unix

package churn

import (
	"errors"
	"time"
)

// processCPU reports that the process's CPU time is not measured here.
func processCPU() (user, sys time.Duration, faults int64, err error) {
	return 0, 0, 0, errors.ErrUnsupported
}
