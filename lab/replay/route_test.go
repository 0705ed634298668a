package replay

import (
	"fmt"
	"strings"
	"testing"

	"github.com/carvelab/carve/lab/trace"
)

// labelledTrace is a native v2 trace of three types: main.buf
// (pointer-free, 48 and 80 bytes), main.burst (pointer-free, 32 bytes,
// allocated and freed in two bursts) and main.node (with pointers), plus
// unlabelled objects; a realloc of a main.buf object to 4000 bytes, and frees of every
// main.buf and main.burst object (main.node and the unlabelled ones stay
// live).
func labelledTrace() string {
	var b strings.Builder
	b.WriteString("# carve trace v2\n")
	b.WriteString("l 1 main.buf size=48 ptrbytes=0\n")
	b.WriteString("l 2 main.burst size=32 ptrbytes=0\n")
	b.WriteString("l 3 main.node size=16 ptrbytes=8\n")
	id := 1
	next := func() int { id++; return id - 1 }
	var live []int
	for i := range 100 {
		n := next()
		fmt.Fprintf(&b, "a %d %d @1\n", n, []int{48, 80}[i%2])
		live = append(live, n)
		fmt.Fprintf(&b, "a %d 16 @3\n", next())
		fmt.Fprintf(&b, "a %d 24\n", next())
	}
	for range 2 { // two bursts of main.burst, each freed whole
		var burst []int
		for range 50 {
			n := next()
			fmt.Fprintf(&b, "a %d 32 @2\n", n)
			burst = append(burst, n)
		}
		for _, n := range burst {
			fmt.Fprintf(&b, "f %d\n", n)
		}
	}
	fmt.Fprintf(&b, "r %d 4000\n", live[0]) // a routed object grows: into its route's pool of that size
	for _, n := range live {
		fmt.Fprintf(&b, "f %d\n", n)
	}
	return b.String()
}

func replayLabelled(t *testing.T, a Allocator) Result {
	t.Helper()
	src, err := trace.NewReader(strings.NewReader(labelledTrace()), "labelled.trace", trace.Native)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(src, a, Options{Touch: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.TraceErrors != 0 {
		t.Fatalf("%d trace errors: %v", res.TraceErrors, res.FirstTraceError)
	}
	return res
}

// TestRoutes replays a labelled trace with its types routed to pools and
// an arena, and checks where the objects went: every routed object in
// its lane, every other on the heap behind, the figures the same as the
// plain heap's where they must be, and the unused route named.
func TestRoutes(t *testing.T) {
	plain := newAlloc(t, "first-fit")
	want := replayLabelled(t, plain)

	base, err := New("first-fit")
	if err != nil {
		t.Fatal(err)
	}
	a, err := WithRoutes([]Route{{Label: "main.buf"}, {Label: "main.burst", Into: IntoArena}, {Label: "main.missing"}}, base)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	got := replayLabelled(t, a)
	if got.PeakLive != want.PeakLive || got.Ops != want.Ops {
		t.Errorf("routed replay: peak live %d, %d ops; plain: %d, %d", got.PeakLive, got.Ops, want.PeakLive, want.Ops)
	}

	w := a.(*routed)
	bufs, bursts := w.r.lanes[0], w.r.lanes[1]
	// The realloc to 4000 bytes stays with the route: its pool of 4000.
	if len(bufs.pools) != 3 || bufs.pools[48] == nil || bufs.pools[80] == nil || bufs.pools[4000] == nil {
		t.Errorf("main.buf went to pools of sizes %v, want 48, 80 and 4000", bufs.order)
	}
	for size, p := range bufs.pools {
		st := p.Stats()
		want := int64(50)
		if size == 4000 {
			want = 1
		}
		if st.Carved != want || st.InUse != 0 {
			t.Errorf("pool %d: %d chunks carved, %d in use; want %d and 0 (every object freed)", size, st.Carved, st.InUse, want)
		}
	}
	if bursts.arena == nil || bursts.inArena != 0 {
		t.Errorf("main.burst: arena %v, %d objects left in it; want an arena, emptied", bursts.arena, bursts.inArena)
	}
	if st := bursts.arena.Stats(); st.Live != 0 {
		t.Errorf("main.burst's arena: %d bytes live after the last burst's frees, want 0 (reset)", st.Live)
	}
	// The heap behind holds what was not routed: at the end, the
	// main.node and unlabelled objects the trace never frees.
	const unrouted = 100 * (16 + 24)
	if s := base.Stats(); s.Live != unrouted {
		t.Errorf("heap behind: %d bytes live at the end, want %d", s.Live, unrouted)
	}
	if un := Unrouted(a); len(un) != 1 || un[0].Label != "main.missing" {
		t.Errorf("Unrouted = %v, want main.missing alone", un)
	}
	if st := a.Stats(); st.Live != unrouted {
		t.Errorf("routed heap: %d bytes live at the end, want %d", st.Live, unrouted)
	}
}

// TestRoutesRefuseForeign: a free of a block no lane and not the heap
// holds is the heap's error, not a routed allocator's corruption.
func TestRoutesRefuseForeign(t *testing.T) {
	a, err := WithRoutes([]Route{{Label: "main.buf"}}, newAlloc(t, "first-fit"))
	if err != nil {
		t.Fatal(err)
	}
	a.(LabeledAllocator).UseLabels(&trace.Labels{})
	if err := a.Free(make([]byte, 16)); err == nil {
		t.Error("Free of a Go slice: no error")
	}
	if _, err := WithRoutes([]Route{{}}, a); err == nil {
		t.Error("WithRoutes with an empty label: no error")
	}
	if _, err := WithRoutes([]Route{{Label: "main.buf"}, {Label: "main.buf", Into: IntoArena}}, a); err == nil {
		t.Error("WithRoutes with a label routed twice: no error")
	}
}

// TestRouteToHeap replays the labelled trace with main.buf's objects, of
// two sizes, in one carve heap: every one of them lands there and is
// freed there, and the rest stays on the heap behind.
func TestRouteToHeap(t *testing.T) {
	base, err := New("first-fit")
	if err != nil {
		t.Fatal(err)
	}
	a, err := WithRoutes([]Route{{Label: "main.buf", Into: IntoHeap}}, base)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	want := replayLabelled(t, newAlloc(t, "first-fit"))
	got := replayLabelled(t, a)
	if got.PeakLive != want.PeakLive || got.Ops != want.Ops {
		t.Errorf("routed replay: peak live %d, %d ops; plain: %d, %d", got.PeakLive, got.Ops, want.PeakLive, want.Ops)
	}
	l := a.(*routed).r.lanes[0]
	if l.heap == nil || len(l.pools) != 0 || l.arena != nil {
		t.Fatalf("main.buf's lane: heap %v, %d pools, arena %v; want the heap alone", l.heap, len(l.pools), l.arena)
	}
	if st := l.heap.Stats(); st.Live != 0 || st.Slots+st.Blocks != 0 {
		t.Errorf("main.buf's heap after the trace: %d bytes live in %d slots and %d blocks, want none (every object freed)", st.Live, st.Slots, st.Blocks)
	}
	if un := Unrouted(a); len(un) != 0 {
		t.Errorf("Unrouted = %v, want none", un)
	}
}

// TestTargetNames: each target's name reads back as the target, and the
// row names spell it.
func TestTargetNames(t *testing.T) {
	for _, c := range Targets {
		b, err := c.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Target
		if err := back.UnmarshalText(b); err != nil || back != c {
			t.Errorf("%s read back as %s, %v", b, back, err)
		}
	}
	var bad Target
	if err := bad.UnmarshalText([]byte("slab")); err == nil {
		t.Error(`UnmarshalText("slab"): no error`)
	}
	for _, c := range []struct {
		r    Route
		want string
	}{
		{Route{Label: "T"}, "type=T"},
		{Route{Label: "T", Into: IntoArena}, "arena:type=T"},
		{Route{Label: "T", Into: IntoHeap}, "heap:type=T"},
	} {
		if got := c.r.String(); got != c.want {
			t.Errorf("%#v: %q, want %q", c.r, got, c.want)
		}
	}
}
