package trace

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestGoCycles reads the collections of a Go execution trace: the mark's
// range and the marked bytes the runtime reports just before its end,
// the goal after it; a native trace of version 3 keeps them, and an
// older one has none.
func TestGoCycles(t *testing.T) {
	f, err := os.Open("testdata/labelled/go.trace")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := NewReader(f, "go.trace", Auto)
	if err != nil {
		t.Fatal(err)
	}
	var native bytes.Buffer
	w := NewWriter(&native)
	if err := w.SetLabels(r.Labels()); err != nil {
		t.Fatal(err)
	}
	if _, err := Copy(w, r); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	cycles := r.GoCycles()
	if want := []GoCycle{{Start: 166, End: 178, Marked: 2468408, Goal: 5095394}}; !slices.Equal(cycles, want) {
		t.Fatalf("cycles %v, want %v", cycles, want)
	}
	// The marked bytes are the heap-objects sample in effect at the end.
	var at uint64
	for _, s := range r.GoHeap() {
		if s.Events <= cycles[0].End {
			at = s.Objects
		}
	}
	if at != cycles[0].Marked {
		t.Errorf("the objects sample at the mark's end is %d, the cycle's marked %d", at, cycles[0].Marked)
	}

	back, err := NewReader(bytes.NewReader(native.Bytes()), "go.native", Auto)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, back)
	if got := back.GoCycles(); !slices.Equal(got, cycles) {
		t.Errorf("native v3 gives %v, want %v", got, cycles)
	}
	if !strings.HasPrefix(native.String(), "# carve trace v3\n") {
		t.Errorf("converted header %q, want v3", strings.SplitN(native.String(), "\n", 2)[0])
	}

	old := strings.Replace(native.String(), "# carve trace v3", "# carve trace v2", 1)
	i := strings.Index(old, "\nG ")
	old = old[:i+1] + old[i+1+strings.Index(old[i+1:], "\n")+1:]
	v2, err := NewReader(strings.NewReader(old), "go.v2", Auto)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, v2)
	if got := v2.GoCycles(); got != nil {
		t.Errorf("a v2 trace gives cycles %v, want none", got)
	}
}
