// Command selftraced is a Go program that traces itself with package
// selftrace, for carve record's tests. It keeps 5000 pointer-free records
// in a slice of pointers, drops half of them and allocates 2000 more; what
// it does around that is chosen by its argument:
//
//	(none)   calls defer selftrace.Start()() first, as a program should
//	nostart  holds selftrace.Start but does not call it
//	exit     calls Start and ends with os.Exit, which skips the deferred stop
//	late     calls Start, allocates for 1.5 s (the runtime writes the
//	         trace's first generations) and ends with os.Exit
//	wait     calls Start, prints "ready" and allocates until a signal ends it
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/carvelab/carve/lab/selftrace"
)

// record is 32 bytes, no pointers.
type record struct {
	key, value, seen, flags uint64
}

func main() {
	mode := ""
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	if mode != "nostart" {
		defer selftrace.Start()()
	} else if len(os.Args) > 99 {
		selftrace.Start() // never: the function is linked, not called
	}
	keep := work(5000)
	switch mode {
	case "exit":
		fmt.Println(len(keep))
		os.Exit(0)
	case "late":
		for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); {
			keep = append(keep[:0], work(100)...)
			time.Sleep(time.Millisecond)
		}
		os.Exit(0)
	case "wait":
		fmt.Println("ready")
		for {
			keep = append(keep[:0], work(100)...)
			time.Sleep(time.Millisecond)
		}
	}
	fmt.Println(len(keep))
}

// work allocates n records, drops every other one and allocates 2n/5
// more.
func work(n int) []*record {
	rs := make([]*record, 0, n)
	for i := range n {
		rs = append(rs, &record{key: uint64(i)})
	}
	kept := rs[:0]
	for i, r := range rs {
		if i%2 == 0 {
			kept = append(kept, r)
		}
	}
	for i := range 2 * n / 5 {
		kept = append(kept, &record{key: uint64(n + i)})
	}
	return kept
}
