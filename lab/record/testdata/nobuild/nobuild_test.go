// Package nobuild's test does not compile (a type error): go test fails
// before it runs anything, and writes no execution trace.
package nobuild

import "testing"

func TestNothing(t *testing.T) {
	var n int = "not a number"
	_ = n
}
