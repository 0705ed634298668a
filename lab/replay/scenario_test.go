package replay

import (
	"testing"

	carve "github.com/carvelab/carve"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/trace/gen"
)

type collect []trace.Event

func (c *collect) Write(e trace.Event) error { *c = append(*c, e); return nil }

func generate(t testing.TB, name string, args gen.Args) []trace.Event {
	t.Helper()
	g, ok := gen.Lookup(name)
	if !ok {
		t.Fatalf("no generator %q", name)
	}
	var c collect
	if err := g.Generate(&c, args); err != nil {
		t.Fatal(err)
	}
	return c
}

// phases replays a generated scenario through the named allocator, behind
// a pool of chunks of poolSize bytes when poolSize > 0, and returns the
// footprint at the end of each phase (pool included), the result, and the
// named allocator's own Stats at the end (without the pool's).
func phases(t *testing.T, alloc string, poolSize int, name string, args gen.Args) (map[string]int64, Result, carve.Stats) {
	t.Helper()
	g, _ := gen.Lookup(name)
	ps, err := g.Phases(args)
	if err != nil {
		t.Fatal(err)
	}
	var marks []int64
	for _, p := range ps {
		marks = append(marks, p.End)
	}
	inner := newAlloc(t, alloc)
	a := inner
	if poolSize > 0 {
		if a, err = WithPool(poolSize, a); err != nil {
			t.Fatal(err)
		}
	}
	res, err := Run(trace.Events(generate(t, name, args)), a, Options{Marks: marks})
	if err != nil {
		t.Fatal(err)
	}
	fp := map[string]int64{}
	for i, m := range res.Marks {
		fp[ps[i].Name] = m.Stats.Footprint
	}
	return fp, res, inner.Stats()
}

// The block-allocator article's connection scenario, at n connections: after the setup frees
// every scratch buffer, 1 KiB buffers fit in the holes and the heap does
// not grow; 4 KiB ones do not, and the heap grows by about n × 4 KiB; a
// pool for the scratch buffers leaves no holes between the sessions.
func TestConnection(t *testing.T) {
	const n = 5000
	for _, alloc := range []string{"first-fit", "next-fit", "best-fit", "ao-first-fit"} {
		t.Run(alloc, func(t *testing.T) {
			fp, _, _ := phases(t, alloc, 0, "connection", gen.Args{"n": n, "next": 1024})
			if grew := fp["next buffers"] - fp["scratch freed"]; grew > n*1024/20 {
				t.Errorf("next=1024: the heap grew by %d B, want the buffers in the holes", grew)
			}
			fp, res, _ := phases(t, alloc, 0, "connection", gen.Args{"n": n, "next": 4096})
			grew := fp["next buffers"] - fp["scratch freed"]
			if grew < n*4096*95/100 || grew > n*4096*110/100 {
				t.Errorf("next=4096: the heap grew by %d B, want about n × 4 KiB = %d", grew, n*4096)
			}
			if res.End.External() < n*1024 {
				t.Errorf("next=4096: %d B free in the heap at the end, want the %d of the scratch holes", res.End.External(), n*1024)
			}
			t.Logf("next=4096: grew %d B (%.2f × n × 4 KiB); %d B of holes at the end", grew, float64(grew)/(n*4096), res.End.External())

			// The scratch buffers in a pool: the sessions lie back to back,
			// and no holes are left in the heap.
			_, _, heap := phases(t, alloc, 1024, "connection", gen.Args{"n": n, "next": 4096})
			if ext := heap.External(); ext > n*1024/10 {
				t.Errorf("pooled, next=4096: %d B free in the heap at the end, want almost none", ext)
			}
		})
	}
}

// The block-allocator article's carving scenario, at n connections: with no small objects the
// second wave of 1 KiB buffers reuses the holes; 200-byte small objects
// settle in the holes first (five to a hole of 1040 bytes) and the second
// wave grows the heap by about n × 208 B (the article's 19 MB for 100,000 on
// glibc); with the scratch buffers in a pool the second wave costs
// nothing, and the small objects grow the heap instead.
func TestCarving(t *testing.T) {
	const n = 10000
	for _, alloc := range []string{"first-fit", "best-fit", "ao-first-fit"} {
		t.Run(alloc, func(t *testing.T) {
			fp, _, _ := phases(t, alloc, 0, "carving", gen.Args{"n": n, "smalls": 0})
			if grew := fp["second wave"] - fp["scratch freed"]; grew > n*1024/100 {
				t.Errorf("malloc, smalls=0: the second wave grew the heap by %d B, want the holes reused", grew)
			}
			fp, _, _ = phases(t, alloc, 0, "carving", gen.Args{"n": n, "smalls": 1})
			smalls := fp["small objects"] - fp["scratch freed"]
			wave := fp["second wave"] - fp["small objects"]
			if wave < n*180 || wave > n*260 {
				t.Errorf("malloc, smalls=1: the second wave grew the heap by %d B, want about n × 208 = %d", wave, n*208)
			}
			fp, _, _ = phases(t, alloc, 1024, "carving", gen.Args{"n": n, "smalls": 1})
			poolSmalls := fp["small objects"] - fp["scratch freed"]
			poolWave := fp["second wave"] - fp["small objects"]
			if poolWave > 0 {
				t.Errorf("pool, smalls=1: the second wave grew the heap by %d B, want 0", poolWave)
			}
			if poolSmalls < n*200 {
				t.Errorf("pool, smalls=1: the small objects grew the heap by %d B, want at least n × 200 = %d", poolSmalls, n*200)
			}
			t.Logf("malloc smalls=1: smalls +%d B, second wave +%d B; pool smalls=1: smalls +%d B, second wave +%d B",
				smalls, wave, poolSmalls, poolWave)
		})
	}
}
