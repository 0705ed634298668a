package sizeclass

import (
	"github.com/carvelab/carve/internal/gentest"
	"github.com/carvelab/carve/pool"
	"math/bits"
	"testing"
)

// TestClassesUpToDate runs the generator and compares its output with
// classes.go: the table must be the generator's, not edited by hand.
func TestClassesUpToDate(t *testing.T) {
	gentest.UpToDate(t, "mkclasses.go", "classes.go", "sizeclass")
}

// TestClassTable checks the properties the heap relies on, against brute
// force: the lookup tables give the smallest class that holds a size and
// is aligned enough, classes grow, waste stays bounded, and every slab is
// what a pool makes of it.
func TestClassTable(t *testing.T) {
	brute := func(size, align int) uint8 {
		for c := 1; c < numClasses; c++ {
			if int(classSize[c]) >= size && classAlign(uint8(c)) >= align {
				return uint8(c)
			}
		}
		return 0
	}
	for size := 0; size <= maxSmallSize; size++ {
		for k := 0; k <= maxAlignShift; k++ {
			if got, want := classFor(size, 1<<k), brute(size, 1<<k); got != want {
				t.Fatalf("classFor(%d, %d) = class %d, want %d", size, 1<<k, got, want)
			}
		}
	}
	if classFor(maxSmallSize, MaxAlign) == 0 {
		t.Errorf("no class holds %d bytes aligned to %d", maxSmallSize, MaxAlign)
	}
	for c := 1; c < numClasses; c++ {
		size, prev := int(classSize[c]), int(classSize[c-1])
		if size <= prev || size%8 != 0 {
			t.Errorf("class %d: size %d after %d", c, size, prev)
		}
		// The worst request: one byte more than the previous class.
		if waste := float64(size-prev-1) / float64(size); size > 56 && waste > 0.125 {
			t.Errorf("class %d (%d bytes): worst-case waste %.2f%% > 12.5%%", c, size, 100*waste)
		}
		slab := int(classSlab[c])
		if slab&(slab-1) != 0 || slab/size < 8 || slab%size >= slab/8 {
			t.Errorf("class %d (%d bytes): slab %d holds %d chunks, tail %d", c, size, slab, slab/size, slab%size)
		}
		if a := classAlign(uint8(c)); size%a != 0 || (a < MaxAlign && size%(2*a) == 0) {
			t.Errorf("class %d (%d bytes): alignment %d", c, size, a)
		}
	}
}

// TestClassSlabsArePools checks that the generator's slab rule is the
// pool's: a pool of the class's size with the default slab size commits
// slabs of the size the table lists.
func TestClassSlabsArePools(t *testing.T) {
	for c := 1; c < numClasses; c++ {
		size := int(classSize[c])
		p, err := pool.New(size, pool.Align(classAlign(uint8(c))), pool.Limit(1<<20))
		if err != nil {
			t.Fatalf("pool.New(%d) = %v", size, err)
		}
		st := p.Stats()
		p.Close()
		if st.SlabSize != int(classSlab[c]) || st.Stride != size {
			t.Errorf("class %d: pool of %d bytes has slabs of %d bytes and stride %d, table says %d and %d",
				c, size, st.SlabSize, st.Stride, classSlab[c], size)
		}
	}
}

// TestIndex checks the chunk index: distinct and increasing over every
// chunk of several slabs, for every class.
func TestIndex(t *testing.T) {
	for c := 1; c < numClasses; c++ {
		cl := class{size: uintptr(classSize[c]), base: 1 << 20}
		cl.magic = ^uint64(0)/uint64(cl.size) + 1
		slab := uintptr(classSlab[c])
		per := slab / cl.size
		prev := -1
		for s := uintptr(0); s < 4; s++ {
			for k := uintptr(0); k < per; k++ {
				off := s*slab + k*cl.size
				i := int(cl.index(cl.base + off))
				if i <= prev || uintptr(i) != off/cl.size {
					t.Fatalf("class %d: chunk %d of slab %d (offset %d): index %d after %d", c, k, s, off, i, prev)
				}
				prev = i
			}
		}
		// Far offsets too: the multiply is exact up to any reservation.
		for _, off := range []uintptr{maxClassReserve - cl.size, maxClassReserve/3 - 1, 1<<bits.Len(maxClassReserve) - 1} {
			if got, want := cl.index(cl.base+off), off/cl.size; got != want {
				t.Fatalf("class %d: index of offset %d = %d, want %d", c, off, got, want)
			}
		}
	}
}
