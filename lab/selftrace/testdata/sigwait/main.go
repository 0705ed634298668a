// Command sigwait traces itself with package selftrace, prints "ready"
// and allocates until a signal ends it: the test of selftrace's signals.
package main

import (
	"fmt"
	"time"

	"github.com/carvelab/carve/lab/selftrace"
)

// item is 16 bytes, no pointers.
type item struct{ a, b uint64 }

func main() {
	defer selftrace.Start()()
	keep := make([]*item, 0, 1000)
	for i := range cap(keep) {
		keep = append(keep, &item{a: uint64(i)})
	}
	fmt.Println("ready")
	for i := 0; ; i++ {
		if len(keep) == cap(keep) {
			keep = keep[:0]
		}
		keep = append(keep, &item{a: uint64(i)})
		if i%100 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}
