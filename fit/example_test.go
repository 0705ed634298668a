package fit_test

import (
	"fmt"
	"log"
	"unsafe"

	"github.com/carvelab/carve/fit"
	"github.com/carvelab/carve/mem"
)

// The block-allocator article's stride experiment: two 16-byte requests
// land 32 bytes apart and the first can hold 24, as with glibc on x86-64.
// Each block carries an 8-byte header, and sizes round up to 16 bytes; the
// statistics show the cost as Used - Live.
func Example() {
	h, err := fit.New(fit.FirstFit)
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()

	a, err := h.Alloc(16, 1)
	if err != nil {
		log.Fatal(err)
	}
	b, err := h.Alloc(16, 1)
	if err != nil {
		log.Fatal(err)
	}
	apart := uintptr(unsafe.Pointer(&b[0])) - uintptr(unsafe.Pointer(&a[0]))
	usable, err := h.UsableSize(a)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("malloc(16): addresses differ by %d bytes, usable size %d\n", apart, usable)

	st := h.Stats()
	fmt.Printf("live %d, used %d: headers %d, rounding %d\n", st.Live, st.Used, st.HeaderBytes, st.Used-st.Live-st.HeaderBytes)
	// Output:
	// malloc(16): addresses differ by 32 bytes, usable size 24
	// live 32, used 64: headers 16, rounding 16
}

// The four policies given the same heap: holes of 96, 48, 64 and 176
// bytes in address order (A to D), freed so that the free list reads C, D,
// A, B. A 104-byte request splits D under every policy; then a 40-byte
// request (a 48-byte block) goes where each policy looks first.
func ExamplePolicy() {
	for _, p := range fit.Policies() {
		h, err := fit.New(p)
		if err != nil {
			log.Fatal(err)
		}
		holes := map[string][]byte{}
		for _, hole := range []struct {
			name string
			size int
		}{{"A", 88}, {"B", 40}, {"C", 56}, {"D", 168}} {
			if holes[hole.name], err = h.Alloc(hole.size, 1); err != nil {
				log.Fatal(err)
			}
			if _, err := h.Alloc(16, 1); err != nil { // a separator, kept
				log.Fatal(err)
			}
		}
		for _, name := range []string{"B", "A", "D", "C"} {
			if err := h.Free(holes[name]); err != nil {
				log.Fatal(err)
			}
		}
		if _, err := h.Alloc(104, 1); err != nil {
			log.Fatal(err)
		}
		y, err := h.Alloc(40, 1)
		if err != nil {
			log.Fatal(err)
		}
		at := uintptr(unsafe.Pointer(&y[0]))
		for name, hole := range holes {
			start := uintptr(unsafe.Pointer(&hole[0]))
			if at >= start && at < start+uintptr(cap(hole))+8 {
				fmt.Printf("%-13s hole %s, %d bytes into it\n", p.String()+":", name, at-start)
			}
		}
		h.Close()
	}
	// Output:
	// first-fit:    hole C, 0 bytes into it
	// next-fit:     hole D, 112 bytes into it
	// best-fit:     hole B, 0 bytes into it
	// ao-first-fit: hole A, 0 bytes into it
}

// Freeing the last blocks of a heap leaves a free top; past the threshold
// the heap gives it back to the OS by itself, and Trim gives back all of
// it. A hole below the last block in use stays committed, as in glibc.
func ExampleHeap_Trim() {
	h, err := fit.New(fit.BestFit, fit.TrimThreshold(-1), fit.TopPad(0))
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	keep, err := h.Alloc(4000, 1)
	if err != nil {
		log.Fatal(err)
	}
	big, err := h.Alloc(8<<20, 1)
	if err != nil {
		log.Fatal(err)
	}
	clear(big) // touch it: resident
	fmt.Printf("in use:  footprint %d MiB\n", h.Stats().Footprint>>20)
	if err := h.Free(big); err != nil {
		log.Fatal(err)
	}
	st := h.Stats()
	fmt.Printf("freed:   footprint %d MiB, free top %d MiB\n", st.Footprint>>20, st.Top>>20)
	n, err := h.Trim()
	if err != nil {
		log.Fatal(err)
	}
	st = h.Stats()
	fmt.Printf("trimmed: gave back %d MiB, footprint now %d page, %d block in use\n", n>>20, st.Footprint/int64(mem.PageSize()), st.Blocks)
	_ = keep
	// Output:
	// in use:  footprint 8 MiB
	// freed:   footprint 8 MiB, free top 8 MiB
	// trimmed: gave back 8 MiB, footprint now 1 page, 1 block in use
}
