// Command service is a small service for carve record's tests of --from:
// it serves net/http/pprof on a loopback port the kernel chooses, prints
// its address on standard output ("listening on 127.0.0.1:PORT"), and
// allocates in a loop until it is killed: requests, each with a
// pointer-free header and a body buffer, kept in a ring of 4096 (or of
// the number its argument says), the oldest dropped.
package main

import (
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"strconv"
	"time"
)

// header is a request's header: 48 bytes, no pointers.
type header struct {
	id, arrived, length uint64
	flags               [3]uint64
}

// request points at its header and its body.
type request struct {
	h    *header
	body []byte
}

func main() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("listening on %s\n", ln.Addr())
	go func() {
		fmt.Fprintln(os.Stderr, http.Serve(ln, nil))
		os.Exit(1)
	}()
	n := 4096
	if len(os.Args) > 1 {
		if n, err = strconv.Atoi(os.Args[1]); err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "service: want a ring size, not %q\n", os.Args[1])
			os.Exit(2)
		}
	}
	ring := make([]*request, n)
	for i := uint64(0); ; i++ {
		r := &request{h: &header{id: i, arrived: i, length: 256 + i%512}}
		r.body = make([]byte, r.h.length)
		ring[i%uint64(len(ring))] = r
		if i%64 == 0 {
			time.Sleep(time.Millisecond) // at most 64,000 requests a second: a trace of a few MiB a second
		}
	}
}
