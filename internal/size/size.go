// Package size writes and reads byte counts the way the lab prints them:
// binary units (KiB, MiB, GiB), never decimal ones.
package size

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Format writes a byte count in the unit that suits it: B below 1 KiB,
// KiB (one decimal) below 1 MiB, MiB (two) below 1 GiB, GiB (two) below
// 1 TiB, then TiB (two).
func Format(n int64) string {
	abs := float64(n)
	if abs < 0 {
		abs = -abs
	}
	switch {
	case abs < 1<<10:
		return strconv.FormatInt(n, 10) + " B"
	case abs < 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', 1, 64) + " KiB"
	case abs < 1<<30:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 2, 64) + " MiB"
	case abs < 1<<40:
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', 2, 64) + " GiB"
	}
	return strconv.FormatFloat(float64(n)/(1<<40), 'f', 2, 64) + " TiB"
}

// Digits3 writes a byte count as carve stats prints its tables: B below
// 1 KiB, then three significant digits ("1.50 KiB", "12.3 MiB",
// "256 KiB").
func Digits3(b uint64) string {
	if b < 1<<10 {
		return strconv.FormatUint(b, 10) + " B"
	}
	v, unit := float64(b)/(1<<10), "KiB"
	for _, u := range []string{"MiB", "GiB", "TiB"} {
		if v < 1<<10 {
			break
		}
		v, unit = v/(1<<10), u
	}
	switch {
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64) + " " + unit
	case v < 100:
		return strconv.FormatFloat(v, 'f', 1, 64) + " " + unit
	}
	return strconv.FormatFloat(v, 'f', 0, 64) + " " + unit
}

// units are the suffixes Parse takes, longest first.
var units = []struct {
	suffix string
	n      int64
}{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1},
}

// Parse reads a byte count: a whole number of bytes, optionally followed
// by a binary unit (B, KiB, MiB, GiB, TiB, or K, M, G, T for the same),
// as in 65536, 64KiB, 256MiB. The count must fit in an int64.
func Parse(s string) (int64, error) {
	num, unit := strings.TrimSpace(s), int64(1)
	for _, u := range units {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			num, unit = strings.TrimSpace(n), u.n
			break
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v < 0 || v > math.MaxInt64/unit {
		return 0, fmt.Errorf("want a byte count such as 65536, 64KiB or 256MiB, got %q", s)
	}
	return v * unit, nil
}
