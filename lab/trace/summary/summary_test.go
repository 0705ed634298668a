package summary

import (
	"bytes"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/carvelab/carve/lab/trace"
)

func TestSummarize(t *testing.T) {
	text := `# carve trace v1
a 1 100
c 2 4 25
m 3 64 1000
r 1 300
f 2
f 9
r 8 5
a 3 10
f 1
a 4 0
`
	r, err := trace.NewReader(strings.NewReader(text), "s", trace.Native)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Of(r)
	if err != nil {
		t.Fatal(err)
	}
	// Live after each event: 100, 200, 1200, 1400, 1300, -, -, 310 (3
	// reallocated over itself as 10 bytes: a live alloc), 10, 10.
	want := Trace{
		Events: 10, Ops: [trace.NumOps]int64{0, 3, 3, 2, 1, 1},
		Requested: 100 + 100 + 1000 + 300 + 10 + 0, Smallest: 10, Largest: 1000, Zero: 1,
		PeakLive: 1400, PeakAt: 3, PeakObjects: 3, EndLive: 10, EndObjects: 2,
		UnknownFrees: 1, UnknownReallocs: 1, LiveAllocs: 1,
	}
	want.Sizes[bucket(100)] = 2
	want.Sizes[bucket(1000)] = 1
	want.Sizes[bucket(300)] = 1
	want.Sizes[bucket(10)] = 1
	want.Sizes[0] = 1
	want.Lifetimes[bucket(3)] = 1 // c 2 at 1, freed at 4
	want.Lifetimes[bucket(8)] = 1 // a 1 at 0, freed at 8
	s.Reader = trace.ReaderStats{}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("Of =\n%+v\nwant\n%+v", s, want)
	}
	ff, bf := s.Robson()
	if math.Abs(ff-1400*math.Log2(100)) > 1e-6 || bf != 1400*100 {
		t.Errorf("Robson() = %v, %v", ff, bf)
	}
	if ff, bf := (Trace{}).Robson(); ff != 0 || bf != 0 {
		t.Errorf("Robson of nothing = %v, %v", ff, bf)
	}
}

// bucket is the histogram bucket of a size.
func bucket(n uint64) int {
	b := 0
	for ; n != 0; n >>= 1 {
		b++
	}
	return b
}

// TestSummaryLabels checks the labels' statistics on a small trace: their
// live counts at the trace's peak (not at their own), their own peaks,
// lifetimes, and the order of the table.
func TestSummaryLabels(t *testing.T) {
	var tab trace.Labels
	sess, _ := tab.Intern(trace.Label{Name: "main.session", Attrs: []trace.Attr{{Key: trace.AttrSize, Value: "64"}, {Key: trace.AttrPtrBytes, Value: "0"}}})
	buf, _ := tab.Intern(trace.Label{Name: "uint8", Attrs: []trace.Attr{{Key: trace.AttrSize, Value: "1"}, {Key: trace.AttrPtrBytes, Value: "0"}}})
	conn, _ := tab.Intern(trace.Label{Name: "main.conn", Attrs: []trace.Attr{{Key: trace.AttrSize, Value: "48"}, {Key: trace.AttrPtrBytes, Value: "40"}}})
	evs := []trace.Event{
		{Op: trace.Alloc, ID: 1, Size: 1024, Label: buf}, // 0: 1024
		{Op: trace.Alloc, ID: 2, Size: 64, Label: sess},  // 1: 1088
		{Op: trace.Alloc, ID: 3, Size: 512, Label: buf},  // 2: 1600
		{Op: trace.Alloc, ID: 4, Size: 64, Label: sess},  // 3: 1664
		{Op: trace.Free, ID: 1},                          // 4: 640 (buffer 1 lived 4 events)
		{Op: trace.Free, ID: 3},                          // 5: 128  (buffer 3 lived 3)
		{Op: trace.Alloc, ID: 5, Size: 4096},             // 6: 4224, unlabelled
		{Op: trace.Alloc, ID: 6, Size: 48, Label: conn},  // 7: 4272: the peak
		{Op: trace.Realloc, ID: 6, Size: 32},             // 8: 4256
		{Op: trace.Free, ID: 5},                          // 9: 160
	}
	s, err := OfSource(trace.LabeledEvents(evs, &tab))
	if err != nil {
		t.Fatal(err)
	}
	if s.PeakLive != 4272 || s.PeakAt != 7 {
		t.Fatalf("peak %d at %d, want 4272 at 7", s.PeakLive, s.PeakAt)
	}
	want := []LabelStat{
		{Label: 0, Objects: 1, Bytes: 4096, PeakBytes: 4096, Allocs: 1, Freed: 1, MeanLife: 3, MinSize: 4096, MaxSize: 4096, Size: -1, PtrBytes: -1},
		{Label: sess, Name: "main.session", Objects: 2, Bytes: 128, PeakBytes: 128, Allocs: 2, MinSize: 64, MaxSize: 64, Size: 64, PtrBytes: 0},
		{Label: conn, Name: "main.conn", Objects: 1, Bytes: 48, PeakBytes: 48, Allocs: 1, MinSize: 48, MaxSize: 48, Size: 48, PtrBytes: 40},
		{Label: buf, Name: "uint8", Objects: 0, Bytes: 0, PeakBytes: 1536, Allocs: 2, Freed: 2, MeanLife: 3.5, MinSize: 512, MaxSize: 1024, Size: 1, PtrBytes: 0},
	}
	for i := range want {
		want[i].Share = float64(want[i].Bytes) / 4272
	}
	if !reflect.DeepEqual(s.Labels, want) {
		t.Errorf("Labels =\n%+v\nwant\n%+v", s.Labels, want)
	}
	if s, _ := OfSource(trace.Events(evs)); s.Labels != nil {
		t.Errorf("a trace without a label table: Labels = %+v, want nil", s.Labels)
	}
}

// TestSummaryMarked: a summary of moved frees counts, at each mark's end,
// the bytes the mark found reachable, and its peak live is that of the
// objects not yet known dead; without the move, live holds the garbage.
func TestSummaryMarked(t *testing.T) {
	a := func(id, size uint64) trace.Event { return trace.Event{Op: trace.Alloc, ID: id, Size: size} }
	f := func(id uint64) trace.Event { return trace.Event{Op: trace.Free, ID: id} }
	// 1 (100 B) stays; 2 and 3 (1000 B each) die before the first mark,
	// 4 before the second; the sweeps free them after each mark's end.
	evs := []trace.Event{a(1, 100), a(2, 1000), a(3, 1000), a(4, 1000), f(2), f(3), a(5, 10), f(4)}
	cycles := []trace.GoCycle{{Start: 3, End: 4, Marked: 1100}, {Start: 6, End: 7, Marked: 110}}
	s, err := OfSource(trace.MoveFrees(trace.Events(evs), trace.Events(evs), cycles))
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, c := range s.Cycles {
		got = append(got, c.Live)
	}
	if want := []uint64{1100, 110}; !slices.Equal(got, want) || s.PeakMarked != 1100 {
		t.Errorf("marked heaps %v (peak %d), want %v (peak 1100)", got, s.PeakMarked, want)
	}
	if s.PeakLive != 3100 {
		t.Errorf("peak live %d, want 3100 (all four born before the first mark ended)", s.PeakLive)
	}
	plain, err := OfSource(trace.Events(evs))
	if err != nil {
		t.Fatal(err)
	}
	if plain.Cycles != nil || plain.PeakLive != 3100 {
		t.Errorf("without the move: cycles %v, peak live %d", plain.Cycles, plain.PeakLive)
	}
}

// TestSystemUI reads the shipped AOSP trace whole and checks its counts
// against the README of the traces: 383,154 malloc, 7,847 calloc, 1,066
// memalign, 29,167 realloc, 364,863 free, 357 thread_done lines.
func TestSystemUI(t *testing.T) {
	if raceEnabled {
		t.Skip("the whole trace: read without the race detector (lab/trace's TestNextAndRead reads its first 200 KB)")
	}
	r, err := trace.Open("../../traces/aosp-systemui.txt.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Format() != trace.AOSP {
		t.Errorf("format %v, want aosp", r.Format())
	}
	s, err := Of(r)
	if err != nil {
		t.Fatal(err)
	}
	st := s.Reader
	if st.Lines != 786454 || st.ThreadsDone != 357 {
		t.Errorf("%d lines, %d thread_done, want 786454 and 357", st.Lines, st.ThreadsDone)
	}
	// Every malloc, calloc and memalign line is an allocation, unless it
	// failed; realloc lines are reallocs, allocations or frees; free lines
	// are frees unless of NULL.
	allocs := s.Ops[trace.Alloc] + s.Ops[trace.Calloc] + s.Ops[trace.Memalign]
	if s.Ops[trace.Calloc] != 7847 || s.Ops[trace.Memalign] != 1066 {
		t.Errorf("%d callocs, %d memaligns, want 7847 and 1066", s.Ops[trace.Calloc], s.Ops[trace.Memalign])
	}
	lines := int64(383154 + 7847 + 1066 + 29167 + 364863)
	if got := allocs + s.Ops[trace.Realloc] + s.Ops[trace.Free] + st.NullFrees + st.Failed - st.MissedFrees; got != lines {
		t.Errorf("events and dropped calls add up to %d, want the %d call lines", got, lines)
	}
	if s.UnknownFrees != st.UnknownFrees || s.UnknownReallocs != 0 || s.LiveAllocs != 0 {
		t.Errorf("trace errors %d/%d/%d, want the reader's unknown frees (%d) only", s.UnknownFrees, s.UnknownReallocs, s.LiveAllocs, st.UnknownFrees)
	}
	t.Logf("systemui: %d events, peak live %d bytes (%d objects), %+v", s.Events, s.PeakLive, s.PeakObjects, st)
}

// TestSummaryCSites: a C program's sites are labels of no type (as the
// importers' call stacks make them); a realloc at another site moves its
// object's bytes to that site, and a site is printed alone, with no type.
func TestSummaryCSites(t *testing.T) {
	var tab trace.Labels
	site := func(s string) uint32 {
		l, err := tab.Intern(trace.Label{Attrs: []trace.Attr{{Key: trace.AttrSite, Value: s}}})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	node, name, libc := site("make_node (prog.c:12)"), site("make_name (prog)"), site("libc.so.6+0x500")
	evs := []trace.Event{
		{Op: trace.Alloc, ID: 1, Size: 100, Label: node},
		{Op: trace.Alloc, ID: 2, Size: 50, Label: name},
		{Op: trace.Calloc, ID: 3, N: 4, Size: 32, Label: libc},
		{Op: trace.Realloc, ID: 2, Size: 300, Label: node},
		{Op: trace.Alloc, ID: 4, Size: 7, Label: name},
		{Op: trace.Alloc, ID: 5, Size: 5},
		{Op: trace.Free, ID: 1},
	}
	s, err := OfSource(trace.LabeledEvents(evs, &tab))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, st := range s.Sites {
		got[st.Site] = st.Bytes
	}
	if got["make_node (prog.c:12)"] != 400 || got["make_name (prog)"] != 7 || got["libc.so.6+0x500"] != 32 {
		t.Errorf("sites at the peak: %v", got)
	}
	var buf bytes.Buffer
	if err := s.WriteSites(&buf, 10); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "make_node (prog.c:12)\n") {
		t.Errorf("a C site is printed alone, with no type:\n%s", buf.String())
	}
}
