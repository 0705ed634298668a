// Command goprog writes the Go execution trace of testdata/labelled/go.trace,
// the golden input of the Go importer: a few objects of each kind the
// importer handles, then a GC, whose sweep frees the dead ones.
//
//	GODEBUG=traceallocfree=1 go run ./testdata/goprog testdata/labelled/go.trace
//
// The golden output depends on the trace, not on this program: run
// go test ./lab/trace -update after recording a new trace.
package main

import (
	"log"
	"os"
	"runtime"
	"runtime/trace"
)

// session holds no pointers; conn does.
type session struct{ id, start, last, bytes uint64 }

type conn struct {
	s   *session
	buf []byte
}

var (
	conns []*conn
	tiny  []*int32
	large []byte
)

func main() {
	f, err := os.Create(os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	if err := trace.Start(f); err != nil {
		log.Fatal(err)
	}
	for i := range 4 {
		conns = append(conns, &conn{s: &session{id: uint64(i)}, buf: make([]byte, 1024)})
	}
	for i := range 3 {
		v := new(int32) // tiny objects: packed into 16-byte blocks
		*v = int32(i)
		tiny = append(tiny, v)
	}
	large = make([]byte, 40<<10) // a large object: a span of its own
	conns[0], conns[1] = nil, nil
	runtime.GC()
	trace.Stop()
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
}
