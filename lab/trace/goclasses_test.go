package trace

import "testing"

// TestGoRequests checks the requests a traced size stands for: a class
// from one byte above the class below, a large object from one byte
// above a page less (and above the largest class), anything else itself.
func TestGoRequests(t *testing.T) {
	for _, c := range []struct{ size, lo, hi uint64 }{
		{8, 1, 8},
		{16, 9, 16},
		{576, 513, 576},
		{32768, 28673, 32768},
		{40960, 32769, 40960}, // five pages: more than the largest class
		{49152, 40961, 49152}, // six pages
		{100, 100, 100},       // no class
		{40961, 40961, 40961}, // no page multiple
	} {
		lo, hi := GoRequests(c.size)
		if lo != c.lo || hi != c.hi {
			t.Errorf("GoRequests(%d) = %d, %d, want %d, %d", c.size, lo, hi, c.lo, c.hi)
		}
	}
}
