//go:build cgo && linux

package libc

import (
	"testing"

	"github.com/carvelab/carve/lab/replay"
)

// TestClockRule checks that loop.c times the C allocators' calls by the
// rule package replay times carve's by.
func TestClockRule(t *testing.T) {
	if checkAfterNs != replay.CheckAfter.Nanoseconds() || longCallNs != replay.LongCall.Nanoseconds() {
		t.Errorf("loop.c checks %d ns after the last checkpoint and after calls over %d ns; package replay %v after and over %v",
			checkAfterNs, longCallNs, replay.CheckAfter, replay.LongCall)
	}
}
