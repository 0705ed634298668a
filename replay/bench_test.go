package replay

import (
	"testing"

	"github.com/carvelab/carve/trace"
)

// BenchmarkRun replays the connection trace (20,000 connections, new
// buffers of 1 KiB that fit the holes: with 4 KiB ones first fit walks
// every hole per request) through first fit, with and without the
// checks: the difference is their cost.
func BenchmarkRun(b *testing.B) {
	g, _ := trace.Lookup("connection")
	var evs collect
	if err := g.Generate(&evs, trace.Args{"n": 20000, "next": 1024}); err != nil {
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
				res, err := Run(Events(evs), a, Options{NoCheck: !check})
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
