package buddy

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/carvelab/carve/mem"
)

const (
	// DefaultLimit is the address space a heap manages when no [Limit]
	// option says otherwise (1 GiB). Reserving it costs no memory.
	DefaultLimit = 1 << 30
	// DefaultMinBlock is the smallest block when no [MinBlock] option
	// says otherwise: 16 bytes, malloc's alignment on 64-bit platforms.
	DefaultMinBlock = 16
	// DefaultGranule is the unit of commit and decommit when no [Granule]
	// option says otherwise (64 KiB, or the page size if that is larger;
	// never more than the heap, rounded up to a power of two).
	DefaultGranule = 64 << 10
	// DefaultRetain is how many bytes of free committed memory a heap
	// keeps for reuse when no [Retain] option says otherwise (1 MiB).
	DefaultRetain = 1 << 20

	// maxLimit bounds the address space of one heap (1 TiB, as mem bounds
	// one reservation), which keeps every order at or below MaxOrder.
	maxLimit = 1 << MaxOrder
	// maxGranule bounds the granule (1 GiB), which keeps the count of
	// blocks per granule in an int32.
	maxGranule = 1 << 30
)

// Option configures a heap built by [New]. The zero Option is invalid.
type Option struct {
	apply func(*config) error
}

type config struct {
	limit    int64
	minBlock int
	maxBlock int // 0: the largest power of two in the heap
	granule  int // 0: DefaultGranule, clamped
	retain   int64
}

// Limit sets the bytes of address space the heap manages: the most it can
// ever commit, and an upper bound on the sum of its blocks. It is rounded
// down to a multiple of the smallest block. A limit that is not a power of
// two is covered by several top-level blocks of decreasing size (100 MiB
// is one of 64, one of 32 and one of 4 MiB). n must be from 1 byte (at
// least MinBlock, checked by New) to 1 TiB; the default is 1 GiB.
func Limit(n int64) Option {
	return Option{func(c *config) error {
		if n <= 0 || n > maxLimit {
			return fmt.Errorf("%w: Limit(%d): want 1 to %d bytes", ErrOption, n, int64(maxLimit))
		}
		c.limit = n
		return nil
	}}
}

// MinBlock sets the smallest block: a power of two from 16 bytes to 1 GiB
// (default 16). Every request takes at least this much.
func MinBlock(n int) Option {
	return Option{func(c *config) error {
		if n < DefaultMinBlock || n > 1<<30 || n&(n-1) != 0 {
			return fmt.Errorf("%w: MinBlock(%d): want a power of two from %d to %d", ErrOption, n, DefaultMinBlock, 1<<30)
		}
		c.minBlock = n
		return nil
	}}
}

// MaxBlock sets the largest block, the order at which splitting starts
// and merging stops: a power of two from MinBlock to the limit. By default
// it is the largest power of two that fits in the limit, so a heap of
// 1 GiB is one block of 1 GiB until the first request splits it. A
// request larger than MaxBlock can never be served.
func MaxBlock(n int) Option {
	return Option{func(c *config) error {
		if n < DefaultMinBlock || int64(n) > maxLimit || n&(n-1) != 0 {
			return fmt.Errorf("%w: MaxBlock(%d): want a power of two from %d to %d", ErrOption, n, DefaultMinBlock, int64(maxLimit))
		}
		c.maxBlock = n
		return nil
	}}
}

// Granule sets the unit in which the heap commits memory and gives it
// back: a power of two from the page size to 1 GiB. A granule is
// committed when a block in it is handed out, and may be decommitted once
// no live block overlaps it. Smaller granules follow the live memory more
// closely; larger ones cost fewer system calls and fewer kernel mappings.
// Decommitting takes away access (mprotect), which splits the kernel's
// mapping: a heap whose committed and decommitted granules alternate needs
// a mapping per granule, and Linux allows about 65530 per process. With
// the default 64 KiB granule a heap of 1 GiB needs at most 16384;
// page-sized granules can pass the limit from 256 MiB up, and then
// commits fail with ErrExhausted.
func Granule(n int) Option {
	return Option{func(c *config) error {
		ps := mem.PageSize()
		if n < ps || n > maxGranule || n&(n-1) != 0 {
			return fmt.Errorf("%w: Granule(%d): want a power of two from the page size %d to %d", ErrOption, n, ps, maxGranule)
		}
		c.granule = n
		return nil
	}}
}

// Retain sets how many bytes of idle granules (committed, with no live
// block in them) the heap keeps for reuse (default 1 MiB). When a Free
// takes the idle bytes past n, the heap gives idle granules back to the
// OS, the highest addresses first, until n/2 are left: a workload that
// frees and allocates around the same size then costs no system calls,
// and one that shrinks gives back all but n/2 bytes. Retain(0) gives a
// granule back as soon as its last block is freed. n must be >= 0.
func Retain(n int64) Option {
	return Option{func(c *config) error {
		if n < 0 {
			return fmt.Errorf("%w: Retain(%d): want >= 0", ErrOption, n)
		}
		c.retain = n
		return nil
	}}
}

// geometry is a configuration checked and completed: what New builds the
// heap from.
type geometry struct {
	span               uint // bytes managed: the limit rounded down to MinBlock
	minOrder, maxOrder uint
	gshift             uint // log2 of the granule
	retain             int64
}

// resolve checks a configuration and fills in the defaults.
func (c config) resolve() (geometry, error) {
	if c.limit > math.MaxInt/2 {
		return geometry{}, fmt.Errorf("%w: Limit(%d): more than this platform can address (%d)", ErrOption, c.limit, math.MaxInt/2)
	}
	if c.limit < int64(c.minBlock) {
		return geometry{}, fmt.Errorf("%w: Limit(%d) is below MinBlock(%d)", ErrOption, c.limit, c.minBlock)
	}
	span := uint(c.limit) &^ uint(c.minBlock-1)
	maxBlock := uint(c.maxBlock)
	if maxBlock == 0 {
		maxBlock = 1 << (bits.Len(span) - 1)
	}
	if maxBlock < uint(c.minBlock) || maxBlock > span {
		return geometry{}, fmt.Errorf("%w: MaxBlock(%d): want from MinBlock (%d) to the limit (%d)", ErrOption, maxBlock, c.minBlock, span)
	}
	granule := uint(c.granule)
	if granule == 0 {
		granule = max(uint(mem.PageSize()), min(DefaultGranule, uint(1)<<bits.Len(span-1)))
	}
	return geometry{
		span:     span,
		minOrder: uint(bits.TrailingZeros(uint(c.minBlock))),
		maxOrder: uint(bits.TrailingZeros(maxBlock)),
		gshift:   uint(bits.TrailingZeros(granule)),
		retain:   c.retain,
	}, nil
}
