package gen

import (
	"math"
	"math/rand/v2"

	"github.com/carvelab/carve/lab/trace"
)

// Synthetic workloads. Their randomness comes from one PCG generator
// seeded with the seed parameter, so a seed names a trace.

var zipfGen = Generator{
	Name: "zipf",
	Doc: "Sizes as the FREENIX paper describes its Hummingbird trace: Zipf-like (many small " +
		"objects, a long tail of large ones) with a spike, one size much more frequent than " +
		"its neighbours. n objects are allocated one after the other; with probability p an " +
		"object has the spike's size, otherwise min × (1 + k) bytes, with k drawn from a Zipf " +
		"distribution of exponent s (P(k) ∝ (1 + k)^-s) up to max bytes. Each object lives " +
		"for a random number of allocations, exponentially distributed with mean life; the " +
		"objects still alive after the last allocation stay live.",
	Compare: "The FREENIX paper, on its Hummingbird trace: the best of nine mallocs at 30.5% fragmentation, the modified buddy at 50.7%.",
	Params: []Param{
		{Name: "seed", Doc: "random seed", Default: 1, Min: 0, Max: 1 << 53, Int: true},
		{Name: "n", Doc: "allocations", Default: 1000000, Min: 0, Max: maxCount, Int: true},
		{Name: "s", Doc: "Zipf exponent, above 1; larger means more small objects", Default: 1.2, Min: 1.0001, Max: 100},
		{Name: "min", Doc: "smallest size and size step, bytes", Default: 8, Min: 1, Max: maxSize, Int: true},
		{Name: "max", Doc: "largest size, bytes", Default: 65536, Min: 1, Max: maxSize, Int: true},
		{Name: "spike", Doc: "size of the spike, bytes", Default: 520, Min: 0, Max: maxSize, Int: true},
		{Name: "p", Doc: "probability of the spike's size", Default: 0.2, Min: 0, Max: 1},
		{Name: "life", Doc: "mean lifetime, allocations", Default: 10000, Min: 0, Max: maxCount},
	},
	gen: func(w trace.EventWriter, a Args) error {
		e := newEmitter(w)
		rng := rand.New(rand.NewPCG(uint64(a["seed"]), 0x7a697066))
		step := uint64(a["min"])
		imax := uint64(a["max"]) / step
		if imax > 0 {
			imax--
		}
		zipf := rand.NewZipf(rng, a["s"], 1, imax)
		spike, p, life := uint64(a["spike"]), a["p"], a["life"]
		var dying deaths
		for i := range uint64(a["n"]) {
			for len(dying) > 0 && dying[0].at <= i {
				e.free(dying.pop().id)
			}
			size := spike
			if rng.Float64() >= p {
				size = step * (1 + zipf.Uint64())
			}
			id := e.alloc(size)
			dying.push(death{at: i + 1 + lifetime(rng, life), id: id})
			if e.err != nil {
				break
			}
		}
		return e.err
	},
}

var phasesGen = Generator{
	Name: "phases",
	Doc: "Phases of different lifetimes and sizes, the pattern that strands memory: each of " +
		"the phases allocates n objects of sizes uniform around a mean (size in the first " +
		"phase, growth times larger in each next one). A fraction keep of each phase's " +
		"objects lives to the end of the trace; the others live for a random number of " +
		"allocations, exponentially distributed with mean life, and all die by the end of " +
		"their phase. The long-lived objects of a phase pin holes that the next phase's " +
		"larger objects cannot use.",
	Params: []Param{
		{Name: "seed", Doc: "random seed", Default: 1, Min: 0, Max: 1 << 53, Int: true},
		{Name: "phases", Doc: "phases", Default: 4, Min: 0, Max: 64, Int: true},
		{Name: "n", Doc: "allocations per phase", Default: 50000, Min: 0, Max: maxCount, Int: true},
		{Name: "size", Doc: "mean size in the first phase, bytes", Default: 32, Min: 1, Max: maxSize},
		{Name: "growth", Doc: "factor between the mean sizes of one phase and the next", Default: 2, Min: 0.01, Max: 100},
		{Name: "keep", Doc: "fraction of each phase's objects that live to the end", Default: 0.05, Min: 0, Max: 1},
		{Name: "life", Doc: "mean lifetime of the others, allocations", Default: 1000, Min: 0, Max: maxCount},
	},
	gen: func(w trace.EventWriter, a Args) error {
		e := newEmitter(w)
		rng := rand.New(rand.NewPCG(uint64(a["seed"]), 0x706861736573))
		n := uint64(a["n"])
		keep, life := a["keep"], a["life"]
		mean := a["size"]
		var dying deaths
		var clock uint64 // allocations so far, all phases
		for range int(a["phases"]) {
			lo := math.Max(1, math.Round(mean/2))
			span := math.Max(1, math.Round(mean)) // sizes lo .. lo+span-1
			if lo+span > maxSize {
				span = math.Max(1, maxSize-lo)
			}
			for range n {
				for len(dying) > 0 && dying[0].at <= clock {
					e.free(dying.pop().id)
				}
				size := uint64(lo) + rng.Uint64N(uint64(span))
				id := e.alloc(size)
				if rng.Float64() >= keep {
					dying.push(death{at: clock + 1 + lifetime(rng, life), id: id})
				}
				clock++
				if e.err != nil {
					return e.err
				}
			}
			for len(dying) > 0 { // the phase ends: its short-lived objects die
				e.free(dying.pop().id)
			}
			mean = math.Min(mean*a["growth"], maxSize)
		}
		return e.err
	},
}

// lifetime draws an exponentially distributed lifetime of the given mean,
// in whole allocations.
func lifetime(rng *rand.Rand, mean float64) uint64 {
	return uint64(math.Min(rng.ExpFloat64()*mean, maxCount))
}

// death is when an object dies: at the allocation numbered at.
type death struct{ at, id uint64 }

// deaths is a min-heap of deaths, by time and then by ID, so the order of
// frees never depends on the heap's layout.
type deaths []death

func (d death) before(o death) bool { return d.at < o.at || d.at == o.at && d.id < o.id }

func (h *deaths) push(d death) {
	*h = append(*h, d)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s[i].before(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *deaths) pop() death {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		c := 2*i + 1
		if c >= len(s) {
			break
		}
		if c+1 < len(s) && s[c+1].before(s[c]) {
			c++
		}
		if !s[c].before(s[i]) {
			break
		}
		s[i], s[c] = s[c], s[i]
		i = c
	}
	*h = s
	return top
}
