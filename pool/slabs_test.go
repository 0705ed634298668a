package pool_test

import (
	"testing"

	"github.com/carvelab/carve/pool"
)

// TestSlabs walks a pool's slabs as it grows, is trimmed, and grows back.
func TestSlabs(t *testing.T) {
	const chunk, slab = 1024, 64 << 10
	const per = slab / chunk
	p, err := pool.New(chunk, pool.SlabSize(slab), pool.Limit(16*slab))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	walk := func() map[int]int {
		m := map[int]int{}
		p.Slabs(func(s, carved int) bool { m[s] = carved; return true })
		return m
	}
	var chunks [][]byte
	for range 2*per + 3 {
		c, err := p.Alloc()
		if err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, c)
	}
	if got := walk(); len(got) != 3 || got[0] != per || got[1] != per || got[2] != 3 {
		t.Fatalf("after %d allocations: slabs %v, want 0 and 1 full, 2 with 3 carved", 2*per+3, got)
	}
	for _, c := range chunks[per : 2*per] { // empty slab 1
		if err := p.Free(c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Trim(); err != nil {
		t.Fatal(err)
	}
	if got := walk(); len(got) != 2 || got[0] != per || got[2] != 3 {
		t.Fatalf("after Trim of slab 1: slabs %v, want 0 full and 2 with 3 carved", got)
	}
	stops := 0
	p.Slabs(func(int, int) bool { stops++; return false })
	if stops != 1 {
		t.Errorf("yield returning false: called %d times, want 1", stops)
	}
}
