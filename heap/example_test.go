package heap_test

import (
	"errors"
	"fmt"

	"github.com/carvelab/carve/heap"
)

func Example() {
	h, err := heap.New()
	if err != nil {
		panic(err)
	}
	defer h.Close()

	greeting, _ := h.Alloc(100, 1) // a slot of the 104-byte class
	copy(greeting, "hello, off-heap world")
	usable, _ := h.UsableSize(greeting)
	buf, _ := h.Alloc(1<<20, 1) // a best-fit block
	st := h.Stats()
	fmt.Println(len(greeting), usable, string(greeting[:5]))
	fmt.Println(st.Live, st.Slots, st.Blocks)

	h.Free(buf)
	h.Free(greeting)
	err = h.Free(greeting)
	fmt.Println(errors.Is(err, heap.ErrDoubleFree), h.Stats().Live)
	// Output:
	// 100 104 hello
	// 1048676 1 1
	// true 0
}

// cache holds values of any size off the Go heap: the map holds slices
// into the heap's memory (pointers into carve memory are fine; pointers
// stored in it are not), and the heap holds the bytes, which the garbage
// collector neither scans nor counts towards its goal.
type cache struct {
	h      *heap.Heap
	values map[string][]byte
}

func (c *cache) put(key string, value []byte) error {
	b, err := c.h.Alloc(len(value), 1)
	if err != nil {
		return err
	}
	copy(b, value)
	if old, ok := c.values[key]; ok {
		c.h.Free(old)
	}
	c.values[key] = b
	return nil
}

func (c *cache) delete(key string) {
	if old, ok := c.values[key]; ok {
		c.h.Free(old)
		delete(c.values, key)
	}
}

// Example_cache keeps 20,000 values of 40 bytes to 4 KiB, replaces a
// third of them, then deletes nine in ten: the heap's
// footprint follows the bytes the cache holds down, though the values
// that stay are spread over the memory the full cache used (each keeps
// the partial pages around it).
func Example_cache() {
	h, _ := heap.New()
	defer h.Close()
	c := &cache{h: h, values: map[string][]byte{}}
	value := make([]byte, 4096)
	for i := range 20000 {
		c.put(fmt.Sprint("key", i), value[:40+i*7919%4057])
	}
	for i := 0; i < 20000; i += 3 {
		c.put(fmt.Sprint("key", i), value[:40+i*7727%4057])
	}
	full := h.Stats()
	for i := range 20000 {
		if i%10 != 0 {
			c.delete(fmt.Sprint("key", i))
		}
	}
	shrunk := h.Stats()
	fmt.Println(len(c.values), "values")
	fmt.Printf("full:   live %4.1f MiB, footprint %4.1f MiB\n", mib(full.Live), mib(full.Footprint))
	fmt.Printf("shrunk: live %4.1f MiB, footprint %4.1f MiB\n", mib(shrunk.Live), mib(shrunk.Footprint))
	// Output:
	// 2000 values
	// full:   live 39.5 MiB, footprint 40.3 MiB
	// shrunk: live  3.9 MiB, footprint 10.8 MiB
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
