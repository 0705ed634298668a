package buddy_test

import (
	"fmt"
	"log"

	"github.com/carvelab/carve/buddy"
)

// The same requests in both modes: 100 requests of 64 bytes take blocks
// of exactly 64 bytes in Plain mode ("buddy"), and of 128 in Header mode
// ("buddy-header"), whose 16-byte header pushes each one past the power of
// two. Internal fragmentation is Used / Live - 1.
func Example() {
	for _, mode := range []buddy.Mode{buddy.Plain, buddy.Header} {
		h, err := buddy.New(mode, buddy.Limit(1<<20))
		if err != nil {
			log.Fatal(err)
		}
		for range 100 {
			if _, err := h.Alloc(64, 16); err != nil {
				log.Fatal(err)
			}
		}
		s := h.Stats()
		fmt.Printf("%-12s live %d B, used %5d B (headers %4d B): %3.0f%% internal fragmentation\n",
			s.Mode, s.Live, s.Used, s.HeaderBytes, 100*(float64(s.Used)/float64(s.Live)-1))
		if err := h.Close(); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// buddy        live 6400 B, used  6400 B (headers    0 B):   0% internal fragmentation
	// buddy-header live 6400 B, used 12800 B (headers 1600 B): 100% internal fragmentation
}

// The block each request takes in each mode. The FREENIX paper's
// observation: with a header, two blocks of one size together need
// slightly more than twice that size, so a request of a power of two lands
// in the next order up.
func ExampleHeap_Alloc() {
	plain, err := buddy.New(buddy.Plain, buddy.Limit(1<<20))
	if err != nil {
		log.Fatal(err)
	}
	defer plain.Close()
	header, err := buddy.New(buddy.Header, buddy.Limit(1<<20))
	if err != nil {
		log.Fatal(err)
	}
	defer header.Close()

	block := func(h *buddy.Heap, size int) int64 {
		b, err := h.Alloc(size, 1)
		if err != nil {
			log.Fatal(err)
		}
		used := h.Stats().Used
		if err := h.Free(b); err != nil {
			log.Fatal(err)
		}
		return used
	}
	fmt.Println("request  buddy  buddy-header")
	for _, size := range []int{48, 64, 100, 128, 1000, 1024, 4096} {
		fmt.Printf("%7d %6d %13d\n", size, block(plain, size), block(header, size))
	}
	// Output:
	// request  buddy  buddy-header
	//      48     64            64
	//      64     64           128
	//     100    128           128
	//     128    128           256
	//    1000   1024          1024
	//    1024   1024          2048
	//    4096   4096          8192
}

// Freeing gives memory back: a granule left with no block in use goes
// back to the OS once the idle memory passes Retain (here 0, at once), so
// the footprint follows the live memory down.
func ExampleHeap_Free() {
	h, err := buddy.New(buddy.Plain, buddy.Retain(0))
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()

	small, err := h.Alloc(100, 1)
	if err != nil {
		log.Fatal(err)
	}
	large, err := h.Alloc(4<<20, 1)
	if err != nil {
		log.Fatal(err)
	}
	s := h.Stats()
	fmt.Printf("in use:    footprint %5d KiB, %d blocks\n", s.Footprint>>10, s.Blocks)

	if err := h.Free(large); err != nil {
		log.Fatal(err)
	}
	s = h.Stats()
	fmt.Printf("large freed: footprint %3d KiB (the small block's granule)\n", s.Footprint>>10)

	if err := h.Free(small); err != nil {
		log.Fatal(err)
	}
	s = h.Stats()
	fmt.Printf("all freed: footprint %5d KiB, %d free block\n", s.Footprint>>10, s.FreeBlocks)
	// Output:
	// in use:    footprint  4160 KiB, 2 blocks
	// large freed: footprint  64 KiB (the small block's granule)
	// all freed: footprint     0 KiB, 1 free block
}
