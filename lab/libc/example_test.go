//go:build cgo && linux

package libc_test

import (
	"fmt"
	"log"

	"github.com/carvelab/carve/lab/libc"
)

// A batch of ops goes to C in one call; the op that fails stops it, and
// the error names it.
func ExampleLoop() {
	l, err := libc.NewLoop(true)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	ops := []libc.Op{
		{Kind: libc.OpMalloc, Slot: 0, Size: 100},
		{Kind: libc.OpMemalign, Slot: 1, Size: 64, Align: 4096},
		{Kind: libc.OpRealloc, Slot: 0, Size: 1000},
		{Kind: libc.OpFree, Slot: 1},
		{Kind: libc.OpMalloc, Slot: 1, Size: 1 << 62}, // more than any machine has
	}
	done, err := l.Run(ops)
	fmt.Println(done, err)
	_, size, ok := l.Block(0)
	fmt.Println(size, ok)
	// Output:
	// 4 libc: out of memory: op 4: malloc of 4611686018427387904 bytes into slot 1
	// 1000 true
}

// A replay child checks that the malloc it was started with really serves
// it: the loader ignores a missing LD_PRELOAD library.
func ExampleActive() {
	const want = "jemalloc" // what LD_PRELOAD named
	if got := libc.Active(); got.Name != want {
		fmt.Printf("asked for %s, running on %s %s: no row\n", want, got.Name, got.Version)
		return
	}
	st, err := libc.Stats()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Footprint, st.Allocated, st.Source)
}
