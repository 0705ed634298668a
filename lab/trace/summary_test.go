package trace

import (
	"math"
	"reflect"
	"strings"
	"testing"
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
	r, err := NewReader(strings.NewReader(text), "s", Native)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Summarize(r)
	if err != nil {
		t.Fatal(err)
	}
	// Live after each event: 100, 200, 1200, 1400, 1300, -, -, 310 (3
	// reallocated over itself as 10 bytes: a live alloc), 10, 10.
	want := Summary{
		Events: 10, Ops: [numOps]int64{0, 3, 3, 2, 1, 1},
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
	s.Reader = ReaderStats{}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("Summarize =\n%+v\nwant\n%+v", s, want)
	}
	ff, bf := s.Robson()
	if math.Abs(ff-1400*math.Log2(100)) > 1e-6 || bf != 1400*100 {
		t.Errorf("Robson() = %v, %v", ff, bf)
	}
	if ff, bf := (Summary{}).Robson(); ff != 0 || bf != 0 {
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
