package replay

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	carve "github.com/carvelab/carve"
	"github.com/carvelab/carve/lab/trace"
)

// where says which target of a Router holds b: "row" (none), or the
// route's String and, for a pool, its chunk size.
func where(r *Router, b []byte) string {
	l, p := r.holder(b)
	switch {
	case l == nil:
		return "row"
	case p != nil:
		return l.route.String() + "/" + strconv.Itoa(p.ChunkSize())
	}
	return l.route.String()
}

// TestRealloc holds the realloc rule (the top of route.go) to each case:
// a block that starts in a target (or on the row) and is resized ends
// where the rule says, its bytes kept.
func TestRealloc(t *testing.T) {
	labels := &trace.Labels{}
	buf, err := labels.Intern(trace.Label{Name: "main.buf"})
	if err != nil {
		t.Fatal(err)
	}
	entry, _ := labels.Intern(trace.Label{Name: "main.Entry"})
	burst, _ := labels.Intern(trace.Label{Name: "main.burst"})
	vals, _ := labels.Intern(trace.Label{Name: "uint8"})
	routes := []Route{
		{Size: 1024},
		{Size: 4096, Into: IntoHeap},
		{Label: "main.buf"},
		{Label: "main.Entry", Chunk: 40},
		{Label: "main.burst", Into: IntoArena},
		{Label: "uint8", Name: "[]byte", Into: IntoHeap},
	}
	for _, tc := range []struct {
		name        string
		size, align int
		label       uint32
		from        string // where the allocation lands
		resize      int
		to          string // where the realloc leaves it ("row": the caller moves it)
	}{
		{"size pool, same size", 1024, 0, 0, "1024/1024", 1024, "1024/1024"},
		{"size pool, grows to the row", 1024, 0, 0, "1024/1024", 2000, "row"},
		{"size pool, into a size heap", 1024, 0, 0, "1024/1024", 4096, "heap:4096"},
		{"size heap holds any size", 4096, 0, 0, "heap:4096", 100, "heap:4096"},
		{"size heap, to 0: the row", 4096, 0, 0, "heap:4096", 0, "row"},
		{"label pools: the pool of the new size", 48, 0, buf, "type=main.buf/48", 4000, "type=main.buf/4000"},
		{"label pools: to the size of a size route stays", 48, 0, buf, "type=main.buf/48", 1024, "type=main.buf/1024"},
		{"chunk: same size stays", 40, 0, entry, "type=main.Entry/40", 40, "type=main.Entry/40"},
		{"chunk: another size leaves", 40, 0, entry, "type=main.Entry/40", 80, "row"},
		{"chunk: another size, into a size pool", 40, 0, entry, "type=main.Entry/40", 1024, "1024/1024"},
		{"arena: always leaves", 32, 0, burst, "arena:type=main.burst", 32, "row"},
		{"arena: into a size pool", 32, 0, burst, "arena:type=main.burst", 1024, "1024/1024"},
		{"label heap", 100, 0, vals, "heap:type=[]byte", 5000, "heap:type=[]byte"},
		{"label first: a 1024-byte []byte in its heap", 1024, 0, vals, "heap:type=[]byte", 1024, "heap:type=[]byte"},
		{"aligned beyond 8: the row", 1024, 16, 0, "row", 0, ""},
		{"no byte: the row", 0, 0, buf, "row", 0, ""},
		{"unrouted size: the row", 100, 0, 0, "row", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewRouter(routes)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			r.UseLabels(labels)
			b, ok, err := r.Alloc(tc.size, tc.align, tc.label)
			if err != nil {
				t.Fatal(err)
			}
			got := "row"
			if ok {
				got = where(r, b)
			}
			if got != tc.from {
				t.Fatalf("Alloc(%d, %d, %d) in %s, want %s", tc.size, tc.align, tc.label, got, tc.from)
			}
			if !ok {
				return
			}
			for i := range b {
				b[i] = byte(i)
			}
			n, ok, err := r.Realloc(b, tc.resize)
			if err != nil {
				t.Fatal(err)
			}
			got = "row"
			if ok {
				got = where(r, n)
				if len(n) != tc.resize {
					t.Errorf("Realloc(%d): %d bytes", tc.resize, len(n))
				}
				for i := range min(len(n), tc.size) {
					if n[i] != byte(i) {
						t.Fatalf("Realloc(%d): byte %d not kept", tc.resize, i)
					}
				}
			}
			if got != tc.to {
				t.Errorf("Realloc(%d) to %s, want %s", tc.resize, got, tc.to)
			}
			want := int64(tc.resize)
			if !ok {
				if err := r.Free(b); err != nil {
					t.Fatal(err)
				}
				want = 0
			}
			if r.live != want {
				t.Errorf("routed bytes %d after the realloc, want %d", r.live, want)
			}
		})
	}
}

// TestRouterStats: the routes' footprint counts their side metadata as
// their Stats do, and the routed peaks are the most they held.
func TestRouterStats(t *testing.T) {
	a, err := WithRoutes([]Route{{Size: 64}, {Size: 1024, Into: IntoHeap}}, mustNew(t, "best-fit"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var blocks [][]byte
	for i := range 1000 {
		b, err := a.Alloc([]int{64, 1024, 200}[i%3], 0)
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, b)
	}
	st := a.Stats()
	if fp := a.Footprint(); fp != st.Footprint {
		t.Errorf("Footprint %d after Stats, Stats.Footprint %d: the metadata counted differently", fp, st.Footprint)
	}
	got, ok := RoutedOf(a)
	if want := int64(334*64 + 333*1024); !ok || got.PeakLive != want || got.Allocs != 667 {
		t.Errorf("RoutedOf = %+v, %v; want a peak live of %d in 667 allocations", got, ok, want)
	}
	if got.PeakFootprint < got.PeakLive {
		t.Errorf("routed peak footprint %d below its peak live %d", got.PeakFootprint, got.PeakLive)
	}
	for _, b := range blocks {
		if err := a.Free(b); err != nil {
			t.Fatal(err)
		}
	}
	if after, _ := RoutedOf(a); after.PeakLive != got.PeakLive {
		t.Errorf("the peak fell after the frees: %+v", after)
	}
}

// TestNewRouterRefuses: a route the router cannot serve is an error.
func TestNewRouterRefuses(t *testing.T) {
	for _, routes := range [][]Route{
		{{Size: 4}}, // pool.New refuses a chunk below its link
		{{Size: 64}, {Size: 64, Into: IntoHeap}},
		{{Label: "T", Size: 64}},
		{{}},
		{{Size: 64, Chunk: 32}},
		{{Label: "T", Chunk: 32, Into: IntoHeap}},
	} {
		if r, err := NewRouter(routes); err == nil {
			r.Close()
			t.Errorf("NewRouter(%+v): no error", routes)
		}
	}
}

// TestAtTypeSize: a route with a chunk takes its label's objects at the
// type's size, in one pool, and the replay counts that size; without
// AtTypeSize a larger request is the route's error.
func TestAtTypeSize(t *testing.T) {
	const tr = "# carve trace v2\nl 1 main.Entry size=40 ptrbytes=0\na 1 48 @1\na 2 48 @1\na 3 64\nf 1\n"
	open := func() trace.Source {
		src, err := trace.NewReader(strings.NewReader(tr), "entry.trace", trace.Native)
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	routes := []Route{{Label: "main.Entry", Chunk: 40}}
	a, err := WithRoutes(routes, mustNew(t, "first-fit"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	res, err := Run(AtTypeSize(open(), routes), a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.PeakLive != 40+40+64 {
		t.Errorf("peak live %d, want %d (the type's size twice, and 64)", res.PeakLive, 40+40+64)
	}
	l := a.(*routed).r.lanes[0]
	if len(l.pools) != 1 || l.pools[40] == nil || l.pools[40].ChunkSize() != 40 {
		t.Errorf("main.Entry's pools %v, want one of 40-byte chunks", l.order)
	}
	b, err := WithRoutes(routes, mustNew(t, "first-fit"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := Run(open(), b, Options{}); err == nil || !strings.Contains(err.Error(), "AtTypeSize") {
		t.Errorf("a 48-byte request for the 40-byte route: %v, want an error naming AtTypeSize", err)
	}
}

// mustNew is New for an allocator a wrapper will close.
func mustNew(t *testing.T, name string) Allocator {
	t.Helper()
	a, err := New(name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestRouterStatsCounted: the pools' figures the router reads without
// walking their free lists (counting the chunks it hands out) are the
// pools' own Stats, after allocations, frees and reallocs in and out.
func TestRouterStatsCounted(t *testing.T) {
	r, err := NewRouter([]Route{{Size: 64}, {Label: "main.buf"}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	labels := &trace.Labels{}
	id, err := labels.Intern(trace.Label{Name: "main.buf"})
	if err != nil {
		t.Fatal(err)
	}
	r.UseLabels(labels)
	rng := rand.New(rand.NewPCG(5, 6))
	var held [][]byte
	for i := range 5000 {
		switch {
		case len(held) > 0 && rng.IntN(3) == 0:
			j := rng.IntN(len(held))
			if err := r.Free(held[j]); err != nil {
				t.Fatal(err)
			}
			held = append(held[:j], held[j+1:]...)
		case len(held) > 0 && rng.IntN(5) == 0:
			j := rng.IntN(len(held))
			n, ok, err := r.Realloc(held[j], []int{64, 48, 96}[rng.IntN(3)])
			switch {
			case err != nil:
				t.Fatal(err)
			case !ok: // to the row: the caller frees it here
				if err := r.Free(held[j]); err != nil {
					t.Fatal(err)
				}
				held = append(held[:j], held[j+1:]...)
			default:
				held[j] = n
			}
		default:
			label := uint32(0)
			size := 64
			if i%2 == 0 {
				label, size = id, []int{48, 96, 64}[rng.IntN(3)]
			}
			b, ok, err := r.Alloc(size, 8, label)
			if err != nil || !ok {
				t.Fatalf("alloc: %v, %v", ok, err)
			}
			held = append(held, b)
		}
	}
	var want carve.Stats
	for _, l := range r.lanes {
		for _, size := range l.order {
			ps := l.pools[size].Stats().Stats
			ps.Footprint += ps.Metadata
			ps.Resident += ps.Metadata
			addStats(&want, ps)
		}
	}
	if got := r.Stats(); got != want {
		t.Errorf("Stats %+v, the pools' own %+v", got, want)
	}
}

// TestRouteBySite: a route by site takes the objects whose label's site
// its pattern names, of any type or of its type alone; the others go to
// the row.
func TestRouteBySite(t *testing.T) {
	labels := &trace.Labels{}
	intern := func(name, site string) uint32 {
		attrs := []trace.Attr{}
		if site != "" {
			attrs = append(attrs, trace.Attr{Key: trace.AttrSite, Value: site})
		}
		id, err := labels.Intern(trace.Label{Name: name, Attrs: attrs})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	setBuf := intern("uint8", "main.(*Cache).Set (cache.go:88)")
	setMeta := intern("main.Meta", "main.(*Cache).Set (cache.go:88)")
	parseBuf := intern("uint8", "main.parse (req.go:12)")
	plain := intern("uint8", "")
	for _, tc := range []struct {
		route Route
		takes map[uint32]bool
	}{
		{Route{Site: "Cache.Set", Into: IntoHeap}, map[uint32]bool{setBuf: true, setMeta: true}},
		{Route{Label: "uint8", Site: "cache.go:88", Into: IntoHeap}, map[uint32]bool{setBuf: true}},
		{Route{Label: "uint8", Into: IntoHeap}, map[uint32]bool{setBuf: true, parseBuf: true, plain: true}},
	} {
		r, err := NewRouter([]Route{tc.route})
		if err != nil {
			t.Fatal(err)
		}
		r.UseLabels(labels)
		for _, l := range []uint32{setBuf, setMeta, parseBuf, plain} {
			_, ok, err := r.Alloc(64, 8, l)
			if err != nil || ok != tc.takes[l] {
				t.Errorf("%s: label %d routed %v, %v; want %v", tc.route, l, ok, err, tc.takes[l])
			}
		}
		r.Close()
		lab, _ := labels.Label(setBuf)
		if moved := []string{tc.route.Moved()}; !trace.MovedBy(lab, moved) {
			t.Errorf("%s: Moved %q does not name the label it routes", tc.route, moved)
		}
	}
}

// TestIdleAtPeakFootprint: a replay books what the routes held beyond
// their requests when the row's footprint peaked: every chunk of the pool
// when a wave of another size makes the peak after the pool's requests
// were freed, only the slabs' rest when the wave is of the pool's size
// and reuses them.
func TestIdleAtPeakFootprint(t *testing.T) {
	const n, chunk = 200, 1024
	idle := map[int]int64{}
	for _, next := range []int{4096, chunk} {
		var b strings.Builder
		b.WriteString("# carve trace v1\n")
		for i := range n {
			fmt.Fprintf(&b, "a %d %d\n", i, chunk)
		}
		for i := range n {
			fmt.Fprintf(&b, "f %d\n", i)
		}
		for i := range n {
			fmt.Fprintf(&b, "a %d %d\n", n+i, next)
		}
		src, err := trace.NewReader(strings.NewReader(b.String()), "waves.trace", trace.Native)
		if err != nil {
			t.Fatal(err)
		}
		a, err := WithPool(chunk, mustNew(t, "best-fit"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Run(src, a, Options{}); err != nil {
			t.Fatal(err)
		}
		got, _ := RoutedOf(a)
		idle[next] = got.IdleAtPeakFootprint
		a.Close()
	}
	if d := idle[4096] - idle[chunk]; d != n*chunk {
		t.Errorf("idle at the peak: %d with a wave of 4096 B, %d with one of %d B; want the first %d above the second (the pool's requests, freed)",
			idle[4096], idle[chunk], chunk, n*chunk)
	}
}
