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

// put stores a copy of value under key, replacing the key's value if it
// has one. The new value is written before the old one is freed.
func (c *cache) put(key string, value []byte) error {
	b, err := c.h.Alloc(len(value), 1)
	if err != nil {
		return err
	}
	copy(b, value)
	if old, ok := c.values[key]; ok {
		if err := c.h.Free(old); err != nil {
			return err
		}
	}
	c.values[key] = b
	return nil
}

// get returns key's value. The slice is the heap's memory: it is valid
// until the key's next put or delete, after which the heap may hand its
// bytes to another value; copy it to keep it longer.
func (c *cache) get(key string) ([]byte, bool) {
	b, ok := c.values[key]
	return b, ok
}

// delete removes key and frees its value.
func (c *cache) delete(key string) error {
	old, ok := c.values[key]
	if !ok {
		return nil
	}
	delete(c.values, key)
	return c.h.Free(old)
}

// Example_cache keeps 20,000 values of 40 bytes to 4 KiB, replaces a
// third of them, then deletes nine in ten: the heap's
// footprint follows the bytes the cache holds down, though the values
// that stay are spread over the memory the full cache used (each keeps
// the partial pages around it).
func Example_cache() {
	h, err := heap.New()
	if err != nil {
		panic(err)
	}
	defer h.Close()
	c := &cache{h: h, values: map[string][]byte{}}
	value := make([]byte, 4096)
	put := func(i, size int) {
		key := fmt.Sprint("key", i)
		copy(value, key) // each value starts with its key
		if err := c.put(key, value[:size]); err != nil {
			panic(err)
		}
	}
	for i := range 20000 {
		put(i, 40+i*7919%4057)
	}
	for i := 0; i < 20000; i += 3 {
		put(i, 40+i*7727%4057)
	}
	full := h.Stats()
	for i := range 20000 {
		if i%10 != 0 {
			if err := c.delete(fmt.Sprint("key", i)); err != nil {
				panic(err)
			}
		}
	}
	shrunk := h.Stats()
	v, _ := c.get("key9990")
	fmt.Println(len(c.values), "values; key9990 holds", len(v), "bytes starting", string(v[:7]))
	fmt.Printf("full:   live %4.1f MiB, footprint %4.1f MiB\n", mib(full.Live), mib(full.Footprint))
	fmt.Printf("shrunk: live %4.1f MiB, footprint %4.1f MiB\n", mib(shrunk.Live), mib(shrunk.Footprint))
	// Output:
	// 2000 values; key9990 holds 231 bytes starting key9990
	// full:   live 39.5 MiB, footprint 40.3 MiB
	// shrunk: live  3.9 MiB, footprint 10.8 MiB
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
