package replay

import (
	"io"
	"testing"

	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/trace/gen"
	"github.com/carvelab/carve/lab/traces"
)

// BenchmarkRun replays the connection trace (20,000 connections, new
// buffers of 1 KiB that fit the holes: with 4 KiB ones first fit walks
// every hole per request) through first fit, with and without the
// checks: the difference is their cost.
func BenchmarkRun(b *testing.B) {
	g, _ := gen.Lookup("connection")
	var evs collect
	if err := g.Generate(&evs, gen.Args{"n": 20000, "next": 1024}); err != nil {
		b.Fatal(err)
	}
	for _, check := range []bool{true, false} {
		name := "check"
		if !check {
			name = "nocheck"
		}
		b.Run(name, func(b *testing.B) {
			var ns float64
			for b.Loop() {
				a, err := New("first-fit")
				if err != nil {
					b.Fatal(err)
				}
				res, err := Run(trace.Events(evs), a, Options{NoCheck: !check})
				if err != nil {
					b.Fatal(err)
				}
				ns = res.NsPerOp
				a.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(evs)), "ns/event")
			b.ReportMetric(ns, "alloc-ns/op")
		})
	}
}

// systemui returns the shipped systemui trace, parsed.
func systemui(b *testing.B) []trace.Event {
	t, _ := traces.Lookup("aosp-systemui")
	r, err := trace.NewReader(t.Open(), t.File, trace.Auto)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var evs collect
	buf := make([]trace.Event, 4096)
	for {
		n, err := r.Read(buf)
		evs = append(evs, buf[:n]...)
		if err == io.EOF {
			return evs
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOverhead replays the parsed systemui trace (770,279 events)
// through first fit three ways: issuing its operations in a bare loop
// (the floor: the allocator's own cost, objects found by ID in a slice),
// through Run without the checks, and through Run with them. Run's
// bookkeeping (live memory, the footprint after every event, the samples,
// the timing) is the difference between the first two:
//
//	go test -run '^$' -bench Overhead -count 10 ./lab/replay | benchstat -col /loop -
func BenchmarkOverhead(b *testing.B) {
	evs := systemui(b)
	var maxID uint64
	for _, e := range evs {
		maxID = max(maxID, e.ID)
	}
	b.Run("loop=bare", func(b *testing.B) {
		blocks := make([][]byte, maxID+1)
		for b.Loop() {
			a, err := New("first-fit")
			if err != nil {
				b.Fatal(err)
			}
			for _, e := range evs {
				var err error
				switch e.Op {
				case trace.Alloc, trace.Memalign:
					blocks[e.ID], err = a.Alloc(int(e.Size), int(e.Align))
				case trace.Calloc:
					blocks[e.ID], err = a.Alloc(int(e.Size), 0)
					clear(blocks[e.ID])
				case trace.Free:
					err = a.Free(blocks[e.ID])
					blocks[e.ID] = nil
				case trace.Realloc:
					blocks[e.ID], err = a.Realloc(blocks[e.ID], int(e.Size))
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			a.Close()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(evs)), "ns/event")
	})
	for _, check := range []bool{false, true} {
		name := "loop=run-nocheck"
		if check {
			name = "loop=run-check"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				a, err := New("first-fit")
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Run(trace.Events(evs), a, Options{NoCheck: !check}); err != nil {
					b.Fatal(err)
				}
				a.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(evs)), "ns/event")
		})
	}
}
