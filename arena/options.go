package arena

import (
	"fmt"

	"github.com/carvelab/carve/mem"
)

const (
	// DefaultBlockSize is the size of the blocks an arena maps when no
	// [BlockSize] option says otherwise (1 MiB).
	DefaultBlockSize = 1 << 20
	// DefaultLimit is the Footprint an arena may reach when no [Limit]
	// option says otherwise (1 GiB): enough for most phases of a program,
	// small enough that a runaway loop fails with [ErrExhausted] instead of
	// taking the machine's memory.
	DefaultLimit = 1 << 30

	// maxBlockSize bounds one block, as mem bounds one reservation (1 TiB).
	maxBlockSize = 1 << 40
	// maxLimit bounds the Limit (128 TiB, the user address space of
	// x86-64 and arm64 Linux), which keeps sizes plus padding far from
	// overflowing an int64.
	maxLimit = 1 << 47
)

// Option configures an arena built by [New]. The zero Option is invalid.
type Option struct {
	apply func(*Arena) error
}

// BlockSize sets the size of the blocks the arena maps, rounded up to a
// whole number of pages. A request larger than a block gets a block of
// its own. Bigger blocks mean fewer mmaps and less TailWaste per request;
// smaller ones a Footprint that follows Live more closely. n must be
// positive, at most 1 TiB and at most the Limit.
func BlockSize(n int) Option {
	return Option{func(a *Arena) error {
		if n <= 0 || int64(n) > maxBlockSize {
			return fmt.Errorf("%w: BlockSize(%d): want 1 to %d bytes", ErrBadOption, n, int64(maxBlockSize))
		}
		ps := mem.PageSize()
		a.blockSize = (n + ps - 1) / ps * ps
		return nil
	}}
}

// Limit caps the arena's Footprint, the bytes committed in all its blocks,
// at n. A request that would need more fails with [ErrExhausted]. n must be
// positive and at most 128 TiB.
func Limit(n int64) Option {
	return Option{func(a *Arena) error {
		if n <= 0 || n > maxLimit {
			return fmt.Errorf("%w: Limit(%d): want 1 to %d bytes", ErrBadOption, n, int64(maxLimit))
		}
		a.limit = n
		return nil
	}}
}

// blockBytes returns the block size, the default for the zero Arena.
func (a *Arena) blockBytes() int {
	if a.blockSize == 0 {
		return DefaultBlockSize
	}
	return a.blockSize
}

// limitBytes returns the limit, the default for the zero Arena.
func (a *Arena) limitBytes() int64 {
	if a.limit == 0 {
		return DefaultLimit
	}
	return a.limit
}
