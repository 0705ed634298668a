package pool_test

import (
	"testing"

	"github.com/carvelab/carve/pool"
)

func TestSmoke(t *testing.T) {
	for _, tags := range []string{"new", "over"} {
		var p *pool.Pool
		var err error
		if tags == "new" {
			p, err = pool.New(1000, pool.Limit(1<<20))
		} else {
			p, err = pool.Over(make([]byte, 1<<20), 1000)
		}
		if err != nil {
			t.Fatal(err)
		}
		var cs [][]byte
		for {
			c, err := p.Alloc()
			if err != nil {
				t.Log(tags, err)
				break
			}
			c[999] = 7
			cs = append(cs, c)
		}
		t.Log(tags, len(cs), p.Stats())
		for _, c := range cs {
			if err := p.Free(c); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Check(); err != nil {
			t.Fatal(err)
		}
		n, err := p.Trim()
		t.Log(tags, n, err, p.Stats())
		if err := p.Check(); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			c, err := p.Alloc()
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Free(c[1:]); err == nil {
				t.Fatal("foreign accepted")
			} else {
				t.Log(err)
			}
		}
		if err := p.Check(); err != nil {
			t.Fatal(err)
		}
		t.Log(tags, p.Stats())
	}
}
