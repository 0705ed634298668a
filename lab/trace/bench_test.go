package trace

import (
	"bufio"
	"bytes"
	"io"
	"runtime"
	"testing"
	"time"
)

// BenchmarkParse measures parsing the shipped systemui trace (786,454
// lines, 19 MB decompressed, from memory), the mapping of addresses to
// IDs included, against the I/O floor: splitting the same text into lines
// with bufio.Scanner and doing nothing with them. Compare the ratios, not
// the absolute times (machines are shared and noisy):
//
//	go test -run '^$' -bench Parse -count 5 ./lab/trace
//
// impl=ratio runs the floor and the AOSP parse one after the other in
// each iteration and reports parse time / floor time as "x-floor", the
// figure carve keeps at 5 or under, and the same in CPU time as
// "x-floor-cpu"; impl=native parses the same events converted to the
// native format.
func BenchmarkParse(b *testing.B) {
	text, err := readFileGz("../traces/aosp-systemui.txt.gz", 0)
	if err != nil {
		b.Fatal(err)
	}
	native := toNative(b, text)
	b.Run("impl=scanner-floor", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for range b.N {
			scanLines(text)
		}
	})
	b.Run("impl=aosp", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for range b.N {
			parseAll(b, text, AOSP)
		}
	})
	b.Run("impl=aosp-next", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for range b.N {
			r, _ := NewReader(bytes.NewReader(text), "systemui", AOSP)
			for {
				if _, err := r.Next(); err != nil {
					break
				}
			}
		}
	})
	b.Run("impl=native", func(b *testing.B) {
		b.SetBytes(int64(len(native)))
		for range b.N {
			parseAll(b, native, Native)
		}
	})
	b.Run("impl=ratio", func(b *testing.B) {
		// Each iteration times the floor and the parse back to back, in
		// wall time and (on Linux) in the thread's CPU time, which the
		// other processes of a busy machine do not inflate.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var floor, parse, floorCPU, parseCPU time.Duration
		for range b.N {
			c0, cpu := threadCPU()
			t0 := time.Now()
			scanLines(text)
			c1, _ := threadCPU()
			t1 := time.Now()
			parseAll(b, text, AOSP)
			c2, _ := threadCPU()
			floor += t1.Sub(t0)
			parse += time.Since(t1)
			if cpu {
				floorCPU += c1 - c0
				parseCPU += c2 - c1
			}
		}
		b.ReportMetric(float64(parse)/float64(floor), "x-floor")
		if floorCPU > 0 {
			b.ReportMetric(float64(parseCPU)/float64(floorCPU), "x-floor-cpu")
		}
	})
}

// scanLines is the floor: lines split, nothing parsed.
func scanLines(text []byte) int {
	s := bufio.NewScanner(bytes.NewReader(text))
	n := 0
	for s.Scan() {
		n++
	}
	return n
}

// parseAll reads every event of text, in batches.
func parseAll(b *testing.B, text []byte, f Format) int {
	r, err := NewReader(bytes.NewReader(text), "systemui", f)
	if err != nil {
		b.Fatal(err)
	}
	evs := make([]Event, 1024)
	total := 0
	for {
		n, err := r.Read(evs)
		total += n
		if err == io.EOF {
			return total
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// toNative converts an AOSP trace to native text.
func toNative(b testing.TB, text []byte) []byte {
	r, err := NewReader(bytes.NewReader(text), "systemui", AOSP)
	if err != nil {
		b.Fatal(err)
	}
	var out bytes.Buffer
	w := NewWriter(&out)
	evs := make([]Event, 1024)
	for {
		n, err := r.Read(evs)
		for _, e := range evs[:n] {
			w.Write(e)
		}
		if err == io.EOF {
			break
		}
	}
	w.Flush()
	return out.Bytes()
}

// BenchmarkWrite measures writing the systemui events as native text.
func BenchmarkWrite(b *testing.B) {
	text, err := readFileGz("../traces/aosp-systemui.txt.gz", 0)
	if err != nil {
		b.Fatal(err)
	}
	r, _ := NewReader(bytes.NewReader(text), "systemui", AOSP)
	var evs []Event
	buf := make([]Event, 1024)
	for {
		n, err := r.Read(buf)
		evs = append(evs, buf[:n]...)
		if err != nil {
			break
		}
	}
	b.ResetTimer()
	for range b.N {
		w := NewWriter(io.Discard)
		for _, e := range evs {
			w.Write(e)
		}
		w.Flush()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
}
