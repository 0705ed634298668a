package heapmap_test

import (
	"fmt"
	"log"

	"github.com/carvelab/carve/fit"
	"github.com/carvelab/carve/heapmap"
)

// The block-allocator article's connection scenario in small: each
// connection allocates a scratch buffer of 1 KiB and a session of 64 bytes,
// back to back, and frees the scratch buffer when it is set up. The heap's
// map shows a hole of 1040 bytes (the 1 KiB block with its header, rounded
// up) next to every live session: free memory no larger request can use.
func Example() {
	h, err := fit.New(fit.FirstFit)
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()

	var scratch [][]byte
	for range 5 {
		b, err := h.Alloc(1024, 8)
		if err != nil {
			log.Fatal(err)
		}
		if _, err := h.Alloc(64, 8); err != nil {
			log.Fatal(err)
		}
		scratch = append(scratch, b)
	}
	for _, b := range scratch {
		if err := h.Free(b); err != nil {
			log.Fatal(err)
		}
	}

	m := h.Map()
	st := m.Stats()
	fmt.Printf("%s: %d holes, the largest %d bytes; %d bytes free, %d live\n", m.Name, st.Holes, st.Largest, st.Free, st.Live)
	for _, s := range m.Segments[:5] {
		fmt.Printf("%6d %5d %v\n", s.Off, s.Len, s.Kind)
	}
	// Output:
	// first-fit: 5 holes, the largest 1040 bytes; 5200 bytes free, 360 live
	//      0     8 padding
	//      8  1040 free
	//   1048     8 header
	//   1056    72 live
	//   1128  1040 free
}

// A map built by hand, and what it adds up to.
func ExampleMap_Stats() {
	var m heapmap.Map
	m.Append(heapmap.Header, 0, 8)
	m.Append(heapmap.Live, 0, 24)
	m.Append(heapmap.Free, 0, 96)
	m.Append(heapmap.Header, 0, 8)
	m.Append(heapmap.Live, 0, 56)
	m.Append(heapmap.Unused, 0, 64)
	st := m.Stats()
	fmt.Printf("size %d: live %d, header %d, free %d in %d holes, unused %d\n", m.Size, st.Live, st.Header, st.Free, st.Holes, st.Unused)
	// Output:
	// size 256: live 80, header 16, free 96 in 1 holes, unused 64
}
