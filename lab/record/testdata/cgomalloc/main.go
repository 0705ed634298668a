// Command cgomalloc is a Go program built with cgo for the tests: it
// calls the C library's malloc 100 times, for blocks of 12345 bytes,
// beside its Go heap, which no C recorder sees.
package main

// #include <stdlib.h>
import "C"

import "fmt"

func main() {
	kept := make([][]byte, 0, 100)
	for range 100 {
		p := C.malloc(12345)
		C.free(p)
		kept = append(kept, make([]byte, 100))
	}
	fmt.Println(len(kept))
}
