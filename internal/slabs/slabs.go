// Package slabs holds what package pool and package lockfree share: the
// values their Align, SlabSize and Limit options set, the defaults, and
// the checks and rounding that turn them into a slab geometry. Each
// package wraps the problems reported here in its own sentinel errors.
package slabs

import (
	"fmt"

	"github.com/carvelab/carve/mem"
)

const (
	defaultAlign    = 8
	defaultSlabSize = 64 << 10
	defaultLimit    = 1 << 30
	minChunks       = 8 // a slab holds at least this many chunks
	maxLimit        = 1 << 40
	limitUnset      = -1 << 63
)

// Config is what the options of a fixed-size pool set.
type Config struct {
	Align    int   // alignment of every chunk (Align option)
	MinAlign int   // the least alignment a typed handle needs
	SlabSize int   // bytes committed at a time (SlabSize option)
	Limit    int64 // most bytes committed (Limit option); unset by default
}

// Defaults returns the configuration before any option: 8-byte alignment,
// 64 KiB slabs and no limit set (Geometry then picks 1 GiB).
func Defaults() Config {
	return Config{Align: defaultAlign, SlabSize: defaultSlabSize, Limit: limitUnset}
}

// AlignProblem describes what is wrong with the Align option, or returns
// "" when it is a power of two from 1 to the page size.
func (c Config) AlignProblem() string {
	if c.Align <= 0 || c.Align&(c.Align-1) != 0 || c.Align > mem.PageSize() {
		return fmt.Sprintf("%d: want a power of two from 1 to the page size %d", c.Align, mem.PageSize())
	}
	return ""
}

// Geometry returns the slab size for chunks stride bytes apart (the
// SlabSize option, doubled until a slab holds at least 8 chunks) and the
// limit (the Limit option, by default 1 GiB or one slab if that is
// larger), or a description of the option that cannot work.
func (c Config) Geometry(stride uintptr) (slab uintptr, limit int64, problem string) {
	if c.SlabSize < mem.PageSize() || c.SlabSize&(c.SlabSize-1) != 0 || c.SlabSize > 1<<30 {
		return 0, 0, fmt.Sprintf("slab size %d: want a power of two from the page size %d to 1 GiB", c.SlabSize, mem.PageSize())
	}
	slab = uintptr(c.SlabSize)
	for slab/stride < minChunks {
		slab <<= 1
	}
	limit = c.Limit
	if limit == limitUnset {
		limit = max(defaultLimit, int64(slab))
	}
	if limit < int64(slab) || limit > maxLimit {
		return 0, 0, fmt.Sprintf("limit %d bytes: want %d (one slab) to %d", limit, slab, int64(maxLimit))
	}
	return slab, limit, ""
}
