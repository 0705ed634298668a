package gen

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/carvelab/carve/lab/trace"
)

// randFreeGen frees blocks in the middle of a heap and none at its top:
// what it asks of an allocator is whether it gives back the pages of free
// memory wherever they lie, since trimming the top gives back nothing.
var randFreeGen = Generator{
	Name: "randfree",
	Doc: "Free memory in the middle of the heap, none at its top: n blocks of sizes drawn " +
		"uniformly from min to max bytes are allocated one after the other, all live at " +
		"once; then the fraction frac of them, chosen at random, is freed in random order, " +
		"and the trace ends there, with the others live. The freed blocks leave holes all " +
		"through the heap and the last blocks allocated are as likely to stay live as any: " +
		"an allocator that returns only the free memory at the top of its heap keeps the " +
		"holes resident, so the RSS at the end over the live bytes at the end shows whether " +
		"it gives back free pages wherever they lie.",
	Params: []Param{
		{Name: "seed", Doc: "random seed", Default: 1, Min: 0, Max: 1 << 53, Int: true},
		{Name: "n", Doc: "blocks", Default: 100000, Min: 0, Max: maxCount, Int: true},
		{Name: "min", Doc: "smallest size, bytes", Default: 4096, Min: 0, Max: maxSize, Int: true},
		{Name: "max", Doc: "largest size, bytes, at least min", Default: 65536, Min: 0, Max: maxSize, Int: true},
		{Name: "frac", Doc: "fraction of the blocks freed", Default: 0.9, Min: 0, Max: 1},
	},
	check: func(a Args) error {
		if a["min"] > a["max"] {
			return fmt.Errorf("trace: generator randfree: min = %v is above max = %v", a["min"], a["max"])
		}
		return nil
	},
	gen: func(w trace.EventWriter, a Args) error {
		e := newEmitter(w)
		rng := rand.New(rand.NewPCG(uint64(a["seed"]), 0x72616e6466726565))
		n := int(a["n"])
		lo, span := uint64(a["min"]), uint64(a["max"]-a["min"])+1
		for range n {
			e.alloc(lo + rng.Uint64N(span))
			if e.err != nil {
				return e.err
			}
		}
		// The first k of a random permutation of the IDs (a partial
		// Fisher-Yates shuffle): each block is as likely as any other to be
		// freed, at any place in the order. IDs fit in 32 bits (maxCount).
		ids := make([]uint32, n)
		for i := range ids {
			ids[i] = uint32(i + 1)
		}
		for i := range randFrees(a) {
			j := i + rng.IntN(n-i)
			ids[i], ids[j] = ids[j], ids[i]
			e.free(uint64(ids[i]))
			if e.err != nil {
				break
			}
		}
		return e.err
	},
	phases: func(a Args) []Phase {
		n := int64(a["n"])
		return []Phase{{"allocate", n}, {"free", n + int64(randFrees(a))}}
	},
}

// randFrees returns how many blocks randfree frees: frac of n, rounded to
// the nearest whole block.
func randFrees(a Args) int { return int(math.Round(a["frac"] * a["n"])) }
