package record

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/carvelab/carve/lab/trace"
)

// TestReadGoHeadBomb reads the head of a Go execution trace of one
// generation of empty batches, 4 MiB of them (about 470 MB of heap for
// x/exp/trace, read whole): it stops at the generation's bound.
func TestReadGoHeadBomb(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bomb.trace")
	bomb := append([]byte("go 1.26 trace\x00\x00\x00"), bytes.Repeat([]byte{1, 1, 0, 0, 0}, 4<<20/5)...) // EvEventBatch gen 1, M 0, time 0, size 0
	if err := os.WriteFile(path, bomb, 0o644); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := readGoHead(path, 0)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, trace.ErrGoGeneration) {
		t.Errorf("readGoHead = %v, want %v", err, trace.ErrGoGeneration)
	}
	// The race detector's build of x/exp/trace allocates more than the
	// release build the bound's cost is measured in (by how much:
	// lab/trace's TestGoGenerationBomb).
	if alloc, max := after.TotalAlloc-before.TotalAlloc, uint64(trace.DefaultMaxGoGeneration+32<<20); alloc > max && !raceEnabled {
		t.Errorf("readGoHead allocated %d B, want less than %d", alloc, max)
	}
}
