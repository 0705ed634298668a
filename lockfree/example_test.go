package lockfree_test

import (
	"errors"
	"fmt"
	"log"
	"sync"

	"github.com/carvelab/carve/lockfree"
)

// Worker goroutines share one pool, each through a cache of its own: most
// of their allocations touch nothing another goroutine touches. When the
// workers are done and their caches flushed, every chunk is back.
func Example() {
	p, err := lockfree.New(64)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			c := p.NewCache() // this goroutine's alone
			defer c.Flush()
			var held [][]byte
			for i := range 1000 {
				b, err := c.Alloc()
				if err != nil {
					log.Fatal(err)
				}
				b[0] = byte(w)
				held = append(held, b)
				if i%10 == 9 { // free in bursts of ten
					for _, b := range held {
						if err := c.Free(b); err != nil {
							log.Fatal(err)
						}
					}
					held = held[:0]
				}
			}
		})
	}
	wg.Wait()
	st := p.Stats()
	fmt.Printf("in use %d, cached %d, all back: %t\n", st.InUse, st.Cached, st.Free == st.Carved)
	// Output:
	// in use 0, cached 0, all back: true
}

// The shared Alloc and Free need no cache: any goroutine may call them,
// and a chunk may be freed by another goroutine than the one that
// allocated it.
func ExamplePool_Alloc() {
	p, err := lockfree.Over(make([]byte, 4*64), 64) // Go memory: the race detector sees it
	if err != nil {
		log.Fatal(err)
	}
	chunks := make(chan []byte, 4)
	go func() {
		for range 4 {
			b, err := p.Alloc()
			if err != nil {
				log.Fatal(err)
			}
			copy(b, "hello")
			chunks <- b
		}
		close(chunks)
	}()
	n := 0
	for b := range chunks {
		n += len(b)
		if err := p.Free(b); err != nil { // freed by another goroutine
			log.Fatal(err)
		}
	}
	_, err = lockfree.Over(make([]byte, 32), 64)
	fmt.Println(n, "bytes passed through;", errors.Is(err, lockfree.ErrChunkSize))
	// Output:
	// 256 bytes passed through; true
}

// Session holds no Go pointers, so it may live in carve memory.
type Session struct {
	ID      uint64
	BytesIn uint64
	Peer    [16]byte
}

func ExampleNewOf() {
	sessions, err := lockfree.NewOf[Session]()
	if err != nil {
		log.Fatal(err)
	}
	defer sessions.Pool().Close()
	c := sessions.NewCache()
	s, err := c.New() // zeroed
	if err != nil {
		log.Fatal(err)
	}
	s.ID, s.BytesIn = 42, 512
	fmt.Printf("session %d: %d bytes in\n", s.ID, s.BytesIn)
	if err := c.Free(s); err != nil {
		log.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("in use:", sessions.Pool().Stats().InUse)

	type conn struct {
		Fd   int
		Name string
	}
	_, err = lockfree.NewOf[conn]()
	fmt.Println(err)
	// Output:
	// session 42: 512 bytes in
	// in use: 0
	// lockfree.NewOf[lockfree_test.conn]: type holds Go pointers, which the garbage collector cannot see in carve memory: conn.Name is a string (string)
}
