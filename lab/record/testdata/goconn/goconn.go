// Package goconn is the block-allocator article's connection scenario as
// a Go program, the workload of carve record's tests of Go programs: n
// connections are set up one after the other, each with a 1 KiB scratch
// buffer and a pointer-free 64-byte session; then every scratch buffer is
// dropped; then each connection gets a 4 KiB follow-up buffer. Then the
// server serves: rounds of a 512-byte response for every connection, each
// kept until the next one replaces it, so that the heap reaches its GC
// goal again and again, as a serving process's does. The connections live
// in a map, and a conn holds pointers (to its session and its buffers),
// so the GC scans it; a session holds none.
package goconn

// session is a connection's state: 64 bytes, no pointers.
type session struct {
	id, started, lastSeen uint64
	bytesIn, bytesOut     uint64
	flags                 [3]uint64
}

// conn is a connection: it points at its session and its buffers.
type conn struct {
	id      int
	sess    *session
	scratch []byte
	next    []byte
	last    []byte // the last response, kept until the next replaces it
}

// Server holds the connections, by id.
type Server struct {
	conns map[int]*conn
}

// Sizes of the scenario, as the article has them.
const (
	ScratchSize  = 1024
	NextSize     = 4096
	ResponseSize = 512
)

// Run sets up n connections, drops their scratch buffers, then gives each
// a follow-up buffer, and returns the server holding them.
func Run(n int) *Server {
	s := &Server{conns: make(map[int]*conn)}
	for i := range n {
		c := &conn{id: i, sess: &session{id: uint64(i), started: uint64(i)}, scratch: make([]byte, ScratchSize)}
		c.scratch[0] = byte(i)
		s.conns[i] = c
	}
	for _, c := range s.conns {
		c.sess.bytesIn += uint64(c.scratch[0])
		c.scratch = nil
	}
	for _, c := range s.conns {
		c.next = make([]byte, NextSize)
		c.next[0] = byte(c.id)
		c.sess.lastSeen++
	}
	return s
}

// Serve makes rounds of responses, one per connection each, and returns
// the bytes sent.
func (s *Server) Serve(rounds int) uint64 {
	var sent uint64
	for r := range rounds {
		for _, c := range s.conns {
			resp := make([]byte, ResponseSize)
			resp[0] = byte(r)
			c.last = resp
			c.sess.bytesOut += uint64(len(resp))
			sent += uint64(len(resp))
		}
	}
	return sent
}

// Len returns the number of connections.
func (s *Server) Len() int { return len(s.conns) }

// Buffered returns the bytes of the connections' buffers.
func (s *Server) Buffered() int {
	n := 0
	for _, c := range s.conns {
		n += len(c.scratch) + len(c.next)
	}
	return n
}
