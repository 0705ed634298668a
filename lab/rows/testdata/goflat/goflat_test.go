// Package goflat is a Go program whose live data is flat while it
// allocates garbage: the workload of the lab's tests of a Go program's
// collections (lab/rows). It keeps 32 MiB of values of 1 KiB and
// allocates 384 MiB of transient buffers of 256 B to 8 KiB, each dropped
// at once, then ends with runtime.GC().
package goflat

import (
	"math/rand/v2"
	"runtime"
	"testing"
)

var (
	kept [][]byte
	sink []byte
)

func TestFlat(t *testing.T) {
	const keep, churn = 32 << 20, 384 << 20
	for range keep / 1024 {
		kept = append(kept, make([]byte, 1024))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < churn; {
		b := make([]byte, 256+r.IntN(8<<10-256))
		b[0] = 1
		sink = b
		n += len(b)
	}
	sink = nil
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	t.Logf("after the last collection: HeapAlloc %d", m.HeapAlloc)
	runtime.KeepAlive(kept)
}
