package buddy

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestBitset drives a bitset and a map with the same random operations,
// single bits and ranges across leaves, and compares them after each.
func TestBitset(t *testing.T) {
	const limit = 5 * leafBits
	r := rand.New(rand.NewPCG(7, 8))
	var s bitset
	model := map[uint]bool{}
	in := make([]bool, limit) // the model again, to find its least element
	for step := range 5000 {
		i := uint(r.IntN(limit))
		switch op := r.IntN(10); {
		case op < 4:
			if !model[i] {
				s.set(i)
				model[i], in[i] = true, true
			}
		case op < 7:
			if model[i] {
				s.clear(i)
				delete(model, i)
				in[i] = false
			}
		case op == 7:
			hi := min(i+uint(r.IntN(3*leafBits/2)), limit)
			s.setRange(i, hi)
			for j := i; j < hi; j++ {
				model[j], in[j] = true, true
			}
		case op == 8:
			hi := min(i+uint(r.IntN(3*leafBits/2)), limit)
			s.clearRange(i, hi)
			for j := i; j < hi; j++ {
				delete(model, j)
				in[j] = false
			}
		case op == 9:
			hi := min(i+uint(r.IntN(3*leafBits/2)), limit)
			want := 0
			for j := i; j < hi; j++ {
				if model[j] {
					want++
				}
			}
			if got := s.count(i, hi); got != want {
				t.Fatalf("step %d: count(%d, %d) = %d, want %d", step, i, hi, got, want)
			}
		}
		if err := s.check(limit); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if s.n != len(model) {
			t.Fatalf("step %d: %d bits set, want %d", step, s.n, len(model))
		}
		if s.has(i) != model[i] {
			t.Fatalf("step %d: has(%d) = %t, want %t", step, i, s.has(i), model[i])
		}
		if len(model) > 0 {
			if got, want := s.first(), uint(slices.Index(in, true)); got != want {
				t.Fatalf("step %d: first() = %d, want %d", step, got, want)
			}
		}
	}
	if s.has(^uint(0)>>1) || s.has(limit*4) {
		t.Fatalf("has past the directory = true")
	}
}
