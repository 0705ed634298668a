package pool_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/carvelab/carve/pool"
)

// The block-allocator article's check: a pool over a region of four
// chunks hands out four distinct chunks, refuses the fifth, and hands out
// a freed chunk next.
func Example() {
	region := make([]byte, 4*64)
	p, err := pool.Over(region, 64)
	if err != nil {
		log.Fatal(err)
	}
	var chunks [4][]byte
	for i := range chunks {
		if chunks[i], err = p.Alloc(); err != nil {
			log.Fatal(err)
		}
	}
	fifth, err := p.Alloc()
	fifthIsNull := fifth == nil && errors.Is(err, pool.ErrExhausted)
	distinct := true
	for i := range chunks {
		for j := range i {
			distinct = distinct && &chunks[i][0] != &chunks[j][0]
		}
	}
	fmt.Printf("fifth is null: %d, distinct: %d\n", b2i(fifthIsNull), b2i(distinct))

	if err := p.Free(chunks[2]); err != nil {
		log.Fatal(err)
	}
	again, err := p.Alloc()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("freed chunk reused: %d\n", b2i(&again[0] == &chunks[2][0]))
	// Output:
	// fifth is null: 1, distinct: 1
	// freed chunk reused: 1
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// The block-allocator article's connection scenario: each connection gets a 1 KiB scratch
// buffer during setup, freed when setup ends. In a pool the freed buffers
// stay whole, so the next wave of buffers fits in them and the pool does
// not grow.
func ExampleNew() {
	scratch, err := pool.New(1024)
	if err != nil {
		log.Fatal(err)
	}
	defer scratch.Close()

	bufs := make([][]byte, 1000)
	for i := range bufs {
		if bufs[i], err = scratch.Alloc(); err != nil {
			log.Fatal(err)
		}
		copy(bufs[i], "handshake")
	}
	st := scratch.Stats()
	fmt.Printf("setup: %d in use, %d bytes live, %d slabs, footprint %d KiB\n", st.InUse, st.Live, st.Slabs, st.Footprint>>10)

	for _, b := range bufs {
		if err := scratch.Free(b); err != nil {
			log.Fatal(err)
		}
	}
	st = scratch.Stats()
	fmt.Printf("after setup: %d in use, %d free, footprint %d KiB\n", st.InUse, st.Free, st.Footprint>>10)

	for i := range bufs {
		if bufs[i], err = scratch.Alloc(); err != nil {
			log.Fatal(err)
		}
	}
	st = scratch.Stats()
	fmt.Printf("next wave: %d in use, %d slabs, footprint %d KiB\n", st.InUse, st.Slabs, st.Footprint>>10)
	// Output:
	// setup: 1000 in use, 1024000 bytes live, 16 slabs, footprint 1024 KiB
	// after setup: 0 in use, 1000 free, footprint 1024 KiB
	// next wave: 1000 in use, 16 slabs, footprint 1024 KiB
}

// Session is what a server keeps per connection. It holds no Go pointers:
// the peer's address is an array, not a net.IP (a slice), so it may live
// in carve memory.
type Session struct {
	ID       uint64
	Opened   int64 // Unix nanoseconds
	BytesIn  uint64
	BytesOut uint64
	Peer     [16]byte
}

func ExampleNewOf() {
	sessions, err := pool.NewOf[Session]()
	if err != nil {
		log.Fatal(err)
	}
	defer sessions.Pool().Close()

	s, err := sessions.New() // zeroed
	if err != nil {
		log.Fatal(err)
	}
	s.ID, s.BytesIn = 42, 512
	fmt.Printf("session %d: %d bytes in, %d out\n", s.ID, s.BytesIn, s.BytesOut)
	if err := sessions.Free(s); err != nil {
		log.Fatal(err)
	}
	st := sessions.Pool().Stats()
	fmt.Printf("chunk size %d, in use %d\n", st.ChunkSize, st.InUse)

	// A type holding a Go pointer is refused when the handle is built,
	// and the error names the field.
	type conn struct {
		Fd   int
		Name string
	}
	_, err = pool.NewOf[conn]()
	fmt.Println(err)
	// Output:
	// session 42: 512 bytes in, 0 out
	// chunk size 48, in use 0
	// pool.NewOf[pool_test.conn]: type holds Go pointers, which the garbage collector cannot see in carve memory: conn.Name is a string (string)
}

// Trim gives the slabs whose chunks are all free back to the OS; slabs
// with a chunk in use stay.
func ExamplePool_Trim() {
	p, err := pool.New(1024, pool.SlabSize(64<<10)) // 64 chunks a slab
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	chunks := make([][]byte, 4*64)
	for i := range chunks {
		if chunks[i], err = p.Alloc(); err != nil {
			log.Fatal(err)
		}
	}
	for _, c := range chunks[:3*64] { // the first three slabs
		if err := p.Free(c); err != nil {
			log.Fatal(err)
		}
	}
	st := p.Stats()
	fmt.Printf("before: slabs %d, footprint %d KiB, chunks in use %d\n", st.Slabs, st.Footprint>>10, st.InUse)
	n, err := p.Trim()
	if err != nil {
		log.Fatal(err)
	}
	st = p.Stats()
	fmt.Printf("trimmed %d KiB\n", n>>10)
	fmt.Printf("after: slabs %d, footprint %d KiB, chunks in use %d\n", st.Slabs, st.Footprint>>10, st.InUse)
	// Output:
	// before: slabs 4, footprint 256 KiB, chunks in use 64
	// trimmed 192 KiB
	// after: slabs 1, footprint 64 KiB, chunks in use 64
}
