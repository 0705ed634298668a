package summary

import (
	"math"
	"reflect"
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

// TestBucket: each bucket's range is the values Of counts in it, end to
// end with its neighbours'.
func TestBucket(t *testing.T) {
	for _, tc := range []struct {
		k      int
		lo, hi uint64
	}{
		{0, 0, 0},
		{1, 1, 1},
		{2, 2, 3},
		{3, 4, 7},
		{11, 1024, 2047},
		{64, 1 << 63, math.MaxUint64},
	} {
		if lo, hi := Bucket(tc.k); lo != tc.lo || hi != tc.hi {
			t.Errorf("Bucket(%d) = %d, %d, want %d, %d", tc.k, lo, hi, tc.lo, tc.hi)
		}
	}
	for k := 1; k <= 64; k++ {
		lo, hi := Bucket(k)
		if bucket(lo) != k || bucket(hi) != k {
			t.Errorf("Bucket(%d) = %d, %d: sizes Of counts in buckets %d and %d", k, lo, hi, bucket(lo), bucket(hi))
		}
		if _, prev := Bucket(k - 1); prev+1 != lo {
			t.Errorf("Bucket(%d) starts at %d, bucket %d ends at %d: a gap or an overlap", k, lo, k-1, prev)
		}
	}
}
