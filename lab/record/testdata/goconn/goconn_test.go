package goconn

import (
	"os"
	"testing"
	"time"
)

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

// TestMain runs the tests, then, with GOCONN_HOLD set to a duration,
// sleeps that long holding nothing new: carve record's RSS test wants a
// test binary that lives for several samples of its RSS.
func TestMain(m *testing.M) {
	code := m.Run()
	if d, err := time.ParseDuration(os.Getenv("GOCONN_HOLD")); err == nil {
		time.Sleep(d)
	}
	os.Exit(code)
}
