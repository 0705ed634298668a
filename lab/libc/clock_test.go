//go:build cgo && linux

package libc

import (
	"testing"

	"github.com/carvelab/carve/lab/replay"
)

// TestClockRule checks that loop.c times the C allocators' calls by the
// rule package replay times carve's by.
func TestClockRule(t *testing.T) {
	if checkEvery != replay.CheckEvery || longCallNs != replay.LongCall.Nanoseconds() {
		t.Errorf("loop.c checks every %d calls and after calls over %d ns; package replay every %d and over %v",
			checkEvery, longCallNs, replay.CheckEvery, replay.LongCall)
	}
}
