package record_test

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/carvelab/carve/lab/record"
	"github.com/carvelab/carve/lab/trace"
)

// fakeTicks is a FakeProc of one process, 1, whose VmRSS at tick t (its
// clock's time over 100 ms) is 10*t and whose VmHWM is too, but for tick
// 0's, 100: a peak that coarsening must keep.
func fakeTicks(tick *int) record.FakeProc {
	return record.FakeProc{
		Status: func(int) (uint64, uint64, bool) {
			if *tick == 0 {
				return 5, 100, true
			}
			return uint64(10 * *tick), uint64(10 * *tick), true
		},
		Children: func(int) []int { return nil },
		Cmdline:  func(int) []byte { return nil },
		Now:      func() (uint64, time.Time) { return uint64(*tick) * 1e8, time.Unix(0, int64(*tick)*1e8) },
	}
}

// TestRSSCoarsen: past its bound a series drops every other sample,
// keeping the larger VmHWM of each pair, and is sampled half as often;
// its VmHWM never falls.
func TestRSSCoarsen(t *testing.T) {
	tick := 0
	s := record.NewSampler(fakeTicks(&tick), 1, "", 4)
	for tick = 0; tick < 10; tick++ {
		s.Tick()
	}
	// Ticks 0-3 sampled, coarsened to 1 and 3; 4 and 6 sampled (every 2
	// ticks), coarsened to 3 and 6; 8 sampled (every 4).
	want := []trace.ClockedRSS{
		{Mono: 3e8, Wall: time.Unix(0, 3e8), RSS: 30, HWM: 100},
		// The fake's VmHWM falls after tick 0: the series' stays at the
		// most it saw (the kernel's VmRSS may pass a later VmHWM).
		{Mono: 6e8, Wall: time.Unix(0, 6e8), RSS: 60, HWM: 100},
		{Mono: 8e8, Wall: time.Unix(0, 8e8), RSS: 80, HWM: 100},
	}
	got := s.Of(1)
	if len(got) != len(want) {
		t.Fatalf("Of(1) = %v, want %v", got, want)
	}
	for i := range want {
		if got[i].Mono != want[i].Mono || !got[i].Wall.Equal(want[i].Wall) || got[i].RSS != want[i].RSS || got[i].HWM != want[i].HWM {
			t.Errorf("sample %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestRSSTestBinary: of a go test run only the test binary is sampled,
// known by its -test.trace argument once it has exec'd (a fork shows
// go's command line until then).
func TestRSSTestBinary(t *testing.T) {
	tick := 0
	p := fakeTicks(&tick)
	p.Children = func(pid int) []int {
		switch {
		case pid == 1:
			return []int{2}
		case pid == 2 && tick >= 2:
			return []int{3, 4}
		}
		return nil
	}
	p.Cmdline = func(pid int) []byte {
		if pid == 4 && tick >= 3 {
			return []byte("/tmp/b001/x.test\x00-test.trace=/tmp/t\x00")
		}
		return []byte("go\x00test\x00-trace=/tmp/t\x00")
	}
	s := record.NewSampler(p, 1, "-test.trace=/tmp/t", 1<<10)
	for tick = 0; tick < 6; tick++ {
		s.Tick()
	}
	if s.TestBinary() != 4 || len(s.Of(4)) != 3 {
		t.Errorf("test binary %d with %d samples, want 4 with 3 (ticks 3 to 5)", s.TestBinary(), len(s.Of(4)))
	}
	for _, pid := range []int{1, 2, 3} {
		if n := len(s.Of(pid)); n != 0 {
			t.Errorf("process %d: %d samples, want none (not the test binary)", pid, n)
		}
	}
}

// TestRSSStop: the sampler's goroutine ends with Stop, after one last
// sample.
func TestRSSStop(t *testing.T) {
	before := runtime.NumGoroutine()
	tick := 1
	s := record.NewSampler(fakeTicks(&tick), 1, "", 1<<10)
	s.Start()
	if n := runtime.NumGoroutine(); n != before+1 {
		t.Errorf("%d goroutines running, want %d (the sampler's)", n, before+1)
	}
	s.Stop()
	for deadline := time.Now().Add(time.Second); runtime.NumGoroutine() > before && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n != before {
		t.Errorf("%d goroutines after Stop, want %d", n, before)
	}
	if n := len(s.Of(1)); n != 2 {
		t.Errorf("%d samples, want 2: at the start and at the stop", n)
	}
}

// rssOf reads the samples of the RSS of a recorded native trace.
func rssOf(t *testing.T, data []byte) (header string, events int64, rss []trace.ProcessRSS) {
	t.Helper()
	r, err := trace.NewReader(bytes.NewReader(data), "recorded", trace.Native)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := r.Next(); err != nil {
			break
		}
		events++
	}
	head, _, _ := bytes.Cut(data, []byte("\n"))
	return string(head), events, r.ProcessRSS()
}

// TestGoTestRSS records the connection workload, held 400 ms after it
// serves (GOCONN_HOLD): its trace's R lines are of the test binary,
// placed in order, VmHWM never below VmRSS nor falling, and the peak
// between the Go heap's own peak and 4 times it plus 64 MiB.
func TestGoTestRSS(t *testing.T) {
	needGo(t)
	if runtime.GOOS != "linux" {
		t.Skip("the sampler needs Linux")
	}
	res, data, err := recordTo(t, "", goconnCmd, "GOCONN_HOLD=400ms")
	if err != nil {
		t.Fatalf("Record = %v", err)
	}
	_, events, rss := rssOf(t, data)
	t.Logf("%d samples: %+v", len(rss), rss)
	if len(rss) < 2 || res.NoRSS != "" || len(res.ProcessRSS) != len(rss) || res.RSSSampled != len(rss) {
		t.Fatalf("%d samples in the trace, Result has %d (%d taken, no RSS %q); want at least 2, the same", len(rss), len(res.ProcessRSS), res.RSSSampled, res.NoRSS)
	}
	for i, s := range rss {
		if s.Of != trace.RSSTestBinary || s.HWM < s.RSS || s.Event < 0 || s.Event > events ||
			i > 0 && (s.Event < rss[i-1].Event || s.HWM < rss[i-1].HWM) {
			t.Errorf("sample %d = %+v (the one before: %+v), want of %q, placed in order, VmHWM not below VmRSS nor falling", i, s, rss[max(i-1, 0)], trace.RSSTestBinary)
		}
	}
	var heap uint64
	for _, s := range res.GoHeap {
		heap = max(heap, s.Objects)
	}
	if _, hwm, _ := trace.RSSPeak(rss); hwm < heap || hwm > 4*heap+64<<20 {
		t.Errorf("peak VmHWM %d, want between the Go heap's peak, %d, and 4 times it plus 64 MiB", hwm, heap)
	}
}

// TestCRSS: a C program's trace (carve's recorder) holds the peak of its
// RSS only, one R line not placed, in a trace of version 3.
func TestCRSS(t *testing.T) {
	needRecorder(t, "carve")
	res, data, err := recordTo(t, "carve", []string{buildC(t, "allocs")})
	if err != nil {
		t.Fatalf("Record = %v", err)
	}
	header, events, rss := rssOf(t, data)
	if header != "# carve trace v3" || events != res.Events {
		t.Errorf("header %q, %d events; want v3 and %d", header, events, res.Events)
	}
	// The program is the process started and starts none: its peak at
	// exit is read too, so that it has one however short its run.
	if len(rss) != 1 || rss[0].Of != trace.RSSProgram || rss[0].Event != -1 || rss[0].HWM < rss[0].RSS || rss[0].HWM == 0 ||
		len(res.ProcessRSS) != 1 || res.ProcessRSS[0] != rss[0] || !res.RSSAtExit {
		t.Errorf("samples %+v, Result %+v (%d taken); want one peak of the program, not placed", rss, res.ProcessRSS, res.RSSSampled)
	}
}

// TestRSSPeak: the peak of a trace without a clock is the largest VmRSS
// and VmHWM sampled, its VmHWM raised by the peak read at exit, which
// stands alone for a process never sampled.
func TestRSSPeak(t *testing.T) {
	ss := []trace.ClockedRSS{{RSS: 10, HWM: 12}, {RSS: 11, HWM: 15}, {RSS: 9, HWM: 15}}
	tests := []struct {
		name    string
		ss      []trace.ClockedRSS
		exitHWM uint64
		rss     uint64
		hwm     uint64
		ok      bool
	}{
		{"none", nil, 0, 0, 0, false},
		{"sampled", ss, 0, 11, 15, true},
		{"exit below the samples", ss, 14, 11, 15, true},
		{"exit above the samples", ss, 20, 11, 20, true},
		{"exit only", nil, 20, 20, 20, true},
	}
	for _, tt := range tests {
		p, ok := record.RSSPeak(tt.ss, tt.exitHWM, trace.RSSProgram)
		if ok != tt.ok || p.RSS != tt.rss || p.HWM != tt.hwm || p.Event != -1 || p.Of != trace.RSSProgram {
			t.Errorf("%s: rssPeak = %+v, %v; want RSS %d, HWM %d, %v, not placed", tt.name, p, ok, tt.rss, tt.hwm, tt.ok)
		}
	}
}
