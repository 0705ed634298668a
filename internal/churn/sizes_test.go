package churn

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSizes checks Size against its distribution: its bounds, the share
// of draws at most 512 bytes (not a half: truncation takes more from
// below than from above), and its mean, for a million draws; and that
// SizeAtMost keeps to its bound.
func TestSizes(t *testing.T) {
	const draws = 1000000
	r := rand.New(rand.NewPCG(1, 1))
	var sum float64
	below, lo, hi := 0, MaxSize, 0
	for range draws {
		n := Size(r)
		sum += float64(n)
		lo, hi = min(lo, n), max(hi, n)
		if n <= Median {
			below++
		}
	}
	mean, share := sum/draws, float64(below)/draws
	wantMean, wantShare := MeanSize(), SizeCDF(Median+0.5)
	t.Logf("%d draws: %d to %d bytes, mean %.1f (want %.1f), %.4f at most %d bytes (want %.4f)",
		draws, lo, hi, mean, wantMean, share, Median, wantShare)
	switch {
	case lo < MinSize || hi > MaxSize:
		t.Fatalf("sizes from %d to %d, want %d to %d", lo, hi, MinSize, MaxSize)
	case math.Abs(mean-wantMean) > 0.01*wantMean:
		t.Fatalf("mean size %.1f, want %.1f within 1%%", mean, wantMean)
	case math.Abs(share-wantShare) > 0.005:
		t.Fatalf("%.4f of sizes at most %d, want %.4f within 0.005", share, Median, wantShare)
	}
	for range 100000 {
		if n := SizeAtMost(r, 600); n < MinSize || n > 600 {
			t.Fatalf("SizeAtMost(600) = %d", n)
		}
	}
}

// TestSampleCPU checks that the clocks move forward.
func TestSampleCPU(t *testing.T) {
	a, err := SampleCPU()
	if err != nil {
		t.Skipf("SampleCPU: %v", err)
	}
	x := 0
	for i := range 10000000 {
		x += i * i
	}
	b, _ := SampleCPU()
	if b.User+b.Sys <= a.User+a.Sys && x != 0 || !b.Wall.After(a.Wall) {
		t.Fatalf("CPU %v then %v, wall %v then %v: want both to grow", a.User+a.Sys, b.User+b.Sys, a.Wall, b.Wall)
	}
	if mapped, objects, _, goal := GoMemory(); mapped <= 0 || objects <= 0 || goal <= 0 {
		t.Fatalf("GoMemory() = %d mapped, %d of objects, goal %d: want all above 0", mapped, objects, goal)
	}
}
