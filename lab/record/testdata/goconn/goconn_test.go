package goconn

import "testing"

// TestConnections runs the scenario with 5000 connections: the program
// whose heap carve record's tests record.
func TestConnections(t *testing.T) {
	const n = 5000
	s := Run(n)
	if s.Len() != n || s.Buffered() != n*NextSize {
		t.Fatalf("Run(%d): %d connections, %d bytes buffered; want %d and %d", n, s.Len(), s.Buffered(), n, n*NextSize)
	}
}
