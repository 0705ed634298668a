package sizeclass_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/carvelab/carve/mem"
	"github.com/carvelab/carve/sizeclass"
)

// A heap rounds each request up to a size class, moves a block only when
// its new size needs another class, refuses a double free, and gives
// empty slabs back to the OS on Trim.
func Example() {
	h, err := sizeclass.New(sizeclass.Limit(64 << 20))
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()

	b, err := h.Alloc(100, 8)
	if err != nil {
		log.Fatal(err)
	}
	n, _ := h.UsableSize(b)
	fmt.Printf("Alloc(100): len %d, cap %d, class %d\n", len(b), cap(b), n)

	same, _ := h.Realloc(b, 104) // still the 104-byte class
	moved, _ := h.Realloc(same, 200)
	n, _ = h.UsableSize(moved)
	fmt.Printf("Realloc(104) in place: %v; Realloc(200) moved: %v, class %d\n", &same[0] == &b[0], &moved[0] != &same[0], n)

	big, _ := h.Alloc(100000, 4096) // a large object: its own pages
	st := h.Stats()
	fmt.Printf("Live %d; Used %d in classes; %d large object, in whole pages: %v\n",
		st.Live, st.Used-st.LargeBytes, st.LargeObjects, st.LargeBytes%int64(mem.PageSize()) == 0)

	fmt.Println(h.Free(big), h.Free(moved))
	err = h.Free(moved)
	fmt.Println("second Free is a double free:", errors.Is(err, sizeclass.ErrDoubleFree))

	released, _ := h.Trim()
	fmt.Printf("Trim released %d KiB; footprint now %d\n", released>>10, h.Stats().Footprint)
	// Output:
	// Alloc(100): len 100, cap 104, class 104
	// Realloc(104) in place: true; Realloc(200) moved: true, class 208
	// Live 100200; Used 208 in classes; 1 large object, in whole pages: true
	// <nil> <nil>
	// second Free is a double free: true
	// Trim released 128 KiB; footprint now 0
}
