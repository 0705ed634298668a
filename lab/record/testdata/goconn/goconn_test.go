package goconn

import "testing"

// TestConnections runs the scenario with 5000 connections, then serves
// 24 rounds of responses: the program whose heap carve record's tests
// record.
func TestConnections(t *testing.T) {
	const n, rounds = 5000, 24
	s := Run(n)
	if s.Len() != n || s.Buffered() != n*NextSize {
		t.Fatalf("Run(%d): %d connections, %d bytes buffered; want %d and %d", n, s.Len(), s.Buffered(), n, n*NextSize)
	}
	if sent := s.Serve(rounds); sent != n*rounds*ResponseSize {
		t.Fatalf("Serve(%d): %d bytes sent, want %d", rounds, sent, n*rounds*ResponseSize)
	}
}
