package replay

import (
	"testing"

	"github.com/carvelab/carve/trace"
)

type collect []trace.Event

func (c *collect) Write(e trace.Event) error { *c = append(*c, e); return nil }

func generate(t *testing.T, name string, args trace.Args) []trace.Event {
	t.Helper()
	g, ok := trace.Lookup(name)
	if !ok {
		t.Fatalf("no generator %q", name)
	}
	var c collect
	if err := g.Generate(&c, args); err != nil {
		t.Fatal(err)
	}
	return c
}

// The seed's lesson: after the setup frees every scratch buffer, 1 KiB
// buffers fit in the holes and the heap does not grow; 4 KiB ones do not,
// and the heap grows by about n × 4 KiB; a pool for the scratch buffers
// leaves no holes between the sessions in the first place.
func TestConnection(t *testing.T) {
	const n = 10000
	setupEnd := 3 * n // n × (scratch, session), then n frees
	// run replays the connection trace through first-fit, behind a pool
	// of 1 KiB chunks when pooled, and returns the footprint after the
	// setup (replayed apart on a fresh heap), the result, and the heap's
	// own figures at the end (without the pool's).
	run := func(next float64, pooled bool) (setupFP int64, res Result, heap Result) {
		evs := generate(t, "connection", trace.Args{"n": n, "next": next})
		var err error
		a := newAlloc(t, "first-fit")
		if pooled {
			if a, err = WithPool(1024, a); err != nil {
				t.Fatal(err)
			}
		}
		setup, err := Run(Events(evs[:setupEnd]), a, Options{})
		if err != nil {
			t.Fatal(err)
		}
		inner := newAlloc(t, "first-fit")
		b := inner
		if pooled {
			if b, err = WithPool(1024, inner); err != nil {
				t.Fatal(err)
			}
		}
		if res, err = Run(Events(evs), b, Options{}); err != nil {
			t.Fatal(err)
		}
		heap.End = inner.Stats()
		return setup.End.Footprint, res, heap
	}

	fp, small, _ := run(1024, false)
	if grew := small.PeakFootprint - fp; grew > n*1024/10 {
		t.Errorf("next=1024: peak footprint grew by %d past the setup's %d", grew, fp)
	}
	fp, big, bigHeap := run(4096, false)
	grew := big.PeakFootprint - fp
	if grew < n*4096*9/10 || grew > n*4096*12/10 {
		t.Errorf("next=4096: peak footprint grew by %d past the setup's %d, want about %d", grew, fp, n*4096)
	}
	t.Logf("first-fit: setup %d B; next 1024: peak %d B; next 4096: grew %d B, %.0f%% fragmentation, %d B free in the heap",
		fp, small.PeakFootprint, grew, big.Fragmentation, bigHeap.End.External())
	if bigHeap.End.External() < n*1024 {
		t.Errorf("next=4096: %d bytes free in the heap, want the %d of the scratch holes", bigHeap.End.External(), n*1024)
	}

	// With the scratch buffers in a pool, the sessions lie back to back
	// in the heap: no holes left between them.
	_, pooled, pooledHeap := run(4096, true)
	if ext := pooledHeap.End.External(); ext > n*1024/10 {
		t.Errorf("pooled: %d bytes free in the heap, want almost none", ext)
	}
	t.Logf("pooled first-fit, next 4096: heap free %d B, total footprint %d B", pooledHeap.End.External(), pooled.End.Footprint)
	_, pooledSmall, _ := run(1024, true)
	if pooledSmall.PeakFootprint > small.PeakFootprint*11/10 {
		t.Errorf("pooled, next 1024: peak footprint %d, unpooled %d", pooledSmall.PeakFootprint, small.PeakFootprint)
	}
}
