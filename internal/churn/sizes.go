// Package churn holds what carve's value benchmarks share: the sizes of
// their values (log-normal, median 512 B, within 32 B to 64 KiB) and what
// a process of its own measures of its CPU and the Go runtime's memory.
// The heap's value cache (heap/cache_bench_test.go) and the value stores
// of the benchmark module (bench/) both draw from it, so that their
// figures are of one workload.
package churn

import (
	"math"
	"math/rand/v2"
)

// The value sizes: log-normal with median Median bytes and sigma Sigma
// (of the natural logarithm), truncated to [MinSize, MaxSize] by drawing
// again.
const (
	Median  = 512
	Sigma   = 1.5
	MinSize = 32
	MaxSize = 64 << 10
)

// Size draws one value size.
func Size(r *rand.Rand) int { return SizeAtMost(r, MaxSize) }

// SizeAtMost draws one value size, drawing again past most bytes: the
// distribution truncated at most instead of MaxSize, for a store that
// cannot hold the largest values.
func SizeAtMost(r *rand.Rand, most int) int {
	for {
		n := int(math.Round(Median * math.Exp(Sigma*r.NormFloat64())))
		if n >= MinSize && n <= min(most, MaxSize) {
			return n
		}
	}
}

// SizeCDF returns the probability that Size draws at most x bytes,
// ignoring the rounding to whole bytes.
func SizeCDF(x float64) float64 {
	return (lnCDF(x, 0) - lnCDF(MinSize, 0)) / (lnCDF(MaxSize, 0) - lnCDF(MinSize, 0))
}

// MeanSize returns the mean of Size's distribution, ignoring the rounding
// to whole bytes: for a log-normal truncated to [a, b],
// exp(mu + sigma²/2) (Φ(β - sigma) - Φ(α - sigma)) / (Φ(β) - Φ(α)),
// with α and β the standardized logarithms of a and b.
func MeanSize() float64 {
	mu := math.Log(Median)
	return math.Exp(mu+Sigma*Sigma/2) *
		(lnCDF(MaxSize, Sigma) - lnCDF(MinSize, Sigma)) /
		(lnCDF(MaxSize, 0) - lnCDF(MinSize, 0))
}

// lnCDF returns Φ((ln x - mu)/sigma - shift), Φ the standard normal CDF.
func lnCDF(x, shift float64) float64 {
	z := (math.Log(x)-math.Log(Median))/Sigma - shift
	return (1 + math.Erf(z/math.Sqrt2)) / 2
}
