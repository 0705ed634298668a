package summary

import (
	"testing"

	"github.com/carvelab/carve/lab/trace"
)

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
