package trace

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	xtrace "golang.org/x/exp/trace"
)

// goTestHeader is the header of the Go execution traces the tests make.
const goTestHeader = "go 1.26 trace\x00\x00\x00"

// goBatch returns an event batch of generation gen, thread m, holding
// data.
func goBatch(gen, m uint64, data []byte) []byte {
	b := []byte{goEvEventBatch}
	for _, v := range []uint64{gen, m, 0, uint64(len(data))} {
		b = binary.AppendUvarint(b, v)
	}
	return append(b, data...)
}

// goTable returns the data of a batch of about n bytes of the table of
// kind (goEvStacks, goEvStrings or goEvCPUSamples), its entries the
// least: stacks of frames frames (0 or 1), strings of no byte, samples of
// zeroes; the IDs of stacks, strings and frames from first.
func goTable(kind byte, first uint64, frames, n int) []byte {
	d := []byte{kind}
	for id := first; len(d) < n-32; id++ {
		switch kind {
		case goEvStacks:
			d = append(d, 3) // EvStack id frames {pc func file line}
			d = binary.AppendUvarint(d, id)
			d = append(d, byte(frames))
			for range frames {
				d = binary.AppendUvarint(d, id)
				d = append(d, 0, 0, 0)
			}
		case goEvStrings:
			d = append(d, 5) // EvString id length
			d = binary.AppendUvarint(d, id)
			d = append(d, 0)
		case goEvCPUSamples:
			d = append(d, 7, 0, 0, 0, 0, 0) // EvCPUSample time M P G stack
		}
	}
	return d
}

// goStream is a Go execution trace made as it is read: the header, then
// the batches batch(0), batch(1)... up to n of them, or up to max bytes.
type goStream struct {
	buf   []byte
	i, n  int
	batch func(i int) []byte
	read  int64  // bytes handed out
	max   int64  // 0: no bound
	atEnd func() // called once, at the end of the batches
}

func (s *goStream) Read(p []byte) (int, error) {
	for len(s.buf) == 0 {
		if s.i == s.n || (s.max > 0 && s.read >= s.max) {
			if s.atEnd != nil {
				s.atEnd()
				s.atEnd = nil
			}
			return 0, io.EOF
		}
		s.buf = s.batch(s.i)
		s.i++
	}
	k := copy(p, s.buf)
	s.buf = s.buf[k:]
	s.read += int64(k)
	return k, nil
}

func newGoStream(n int, batch func(i int) []byte) *goStream {
	return &goStream{buf: []byte(goTestHeader), n: n, batch: batch}
}

// emptyBatch is the bomb's batch: 5 bytes, no event, of generation 1.
func emptyBatch(int) []byte { return goBatch(1, 0, nil) }

// TestGoGenerationBomb reads a Go execution trace of one endless
// generation of empty batches (113 bytes of heap per byte of the trace,
// read whole before its first event): the Reader stops it at the bound,
// with an error naming the flag, having allocated about the bound.
func TestGoGenerationBomb(t *testing.T) {
	const input = 4 << 20 // of the bomb, decompressed: 470 MB of heap unbounded
	bomb := func() *goStream {
		s := newGoStream(1<<62, emptyBatch)
		s.max = input
		return s
	}
	compress := func(w io.WriteCloser, buf *bytes.Buffer) io.Reader {
		if _, err := io.Copy(w, bomb()); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return buf
	}
	var gz, zs bytes.Buffer
	zw, err := zstd.NewWriter(&zs)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		rd   io.Reader
		opt  ReaderOptions
		max  int64 // the bound the read is stopped by
	}{
		{"streamed", bomb(), ReaderOptions{}, DefaultMaxGoGeneration},
		{"gzip", compress(gzip.NewWriter(&gz), &gz), ReaderOptions{}, DefaultMaxGoGeneration},
		{"zstd", compress(zw, &zs), ReaderOptions{}, DefaultMaxGoGeneration},
		{"lower bound", bomb(), ReaderOptions{MaxGoGeneration: 8 << 20}, 8 << 20},
		{"within the first read", bomb(), ReaderOptions{MaxGoGeneration: 64 << 10}, 64 << 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			r, err := NewReaderOptions(tt.rd, "bomb.trace", tt.opt) // fails when the first read passes the bound
			if err == nil {
				defer r.Close()
			}
			for err == nil {
				_, err = r.Next()
			}
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrGoGeneration) || !strings.Contains(err.Error(), "--"+MaxGoGenerationFlag) {
				t.Errorf("err = %v, want %v naming --%s", err, ErrGoGeneration, MaxGoGenerationFlag)
			}
			// The batches read before the stop: each is counted at
			// 2*5+1024 B.
			batches := (tt.max + goBatchCost) / (2*5 + goBatchCost)
			if s, ok := tt.rd.(*goStream); ok && s.read > 5*batches+64<<10 {
				t.Errorf("%d bytes of the bomb read, want about %d", s.read, 5*batches)
			}
			// A batch of the bomb costs x/exp/trace 566 B of heap, live,
			// and 800 B allocated in all (TestGoBatchCost).
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%s: %d B allocated", err, alloc)
			if want := goBombAlloc(tt.max); alloc > want {
				t.Errorf("reading the bomb allocated %d B, want less than %d", alloc, want)
			}
		})
	}
}

// goBombAlloc returns the most a read of a generation bomb stopped at
// bound may allocate: the bound and 32 MiB, or 1.6 times that under the
// race detector, whose build of x/exp/trace allocates more (177-186 MB
// where the release build allocates 111-120 MB; the bound's cost is
// measured in a release build, TestGoBatchCost).
func goBombAlloc(bound int64) uint64 {
	want := uint64(bound) + 32<<20
	if raceEnabled {
		want = want * 8 / 5
	}
	return want
}

// TestGoBoundGenerations checks that GoBound reads the framing of real
// traces to their end, whatever the reads' lengths, and counts each
// generation apart: a generation of tens of MiB of full batches, and any
// number of generations, pass the default bound.
func TestGoBoundGenerations(t *testing.T) {
	golden, err := os.ReadFile("testdata/labelled/go.trace")
	if err != nil {
		t.Fatal(err)
	}
	full := func(i int) []byte {
		if i%641 == 640 { // 640 batches of 64 KiB, 40 MiB, then the generation's end
			return []byte{goEvEndOfGeneration}
		}
		return goBatch(uint64(1+i/641), uint64(i%4), make([]byte, goMaxBatchSize))
	}
	empties := func(i int) []byte { // generations of 100,000 empty batches, 103 MB counted
		if i%100001 == 100000 {
			return []byte{goEvEndOfGeneration}
		}
		return goBatch(uint64(1+i/100001), 0, nil)
	}
	numbered := func(i int) []byte { // a new generation number every 100,000 batches (Go 1.22 to 1.25)
		return goBatch(uint64(1+i/100000), 0, nil)
	}
	tests := []struct {
		name  string
		rd    func() io.Reader
		gens  int   // generations ended
		least int64 // the largest generation's cost, at least
	}{
		{"golden", func() io.Reader { return bytes.NewReader(golden) }, 1, 2 * int64(len(golden)-len(goTestHeader))},
		{"golden byte by byte", func() io.Reader { return &oneByte{bytes.NewReader(golden)} }, 1, 2 * int64(len(golden)-len(goTestHeader))},
		{"40 MiB generations", func() io.Reader { return newGoStream(3*641, full) }, 3, 80 << 20},
		{"generations of empty batches", func() io.Reader { return newGoStream(10*100001, empties) }, 10, 100e6},
		{"generation numbers", func() io.Reader { return newGoStream(10*100000, numbered) }, 9, 100e6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewGoBound(tt.rd(), 0)
			if _, err := io.Copy(io.Discard, b); err != nil {
				t.Fatal(err)
			}
			if b.frame != goFrameType || b.skip != 0 {
				t.Errorf("the framing ends in state %d, %d bytes to pass; want a batch's start", b.frame, b.skip)
			}
			if b.ended != tt.gens || b.peak < tt.least || b.peak > DefaultMaxGoGeneration {
				t.Errorf("%d generations ended, the largest costing %d; want %d, from %d to %d", b.ended, b.peak, tt.gens, tt.least, DefaultMaxGoGeneration)
			}
		})
	}
}

// oneByte reads one byte at a time.
type oneByte struct{ r io.Reader }

func (o *oneByte) Read(p []byte) (int, error) { return o.r.Read(p[:min(len(p), 1)]) }

// TestGoBatchCost measures the heap x/exp/trace holds for a generation
// of batches of each kind, read up to its end, and checks GoBound's
// count against it: at or above it, and for full batches, as a busy
// program writes them, within 10% of it.
func TestGoBatchCost(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("measures the heap: not with -short or -race")
	}
	tests := []struct {
		name  string
		n     int
		batch func(i int) []byte
		tight bool // the count must be within 10% of the heap
	}{
		{"empty", 100000, emptyBatch, false},
		{"30 bytes", 100000, func(int) []byte { return goBatch(1, 0, make([]byte, 30)) }, false},
		{"500 bytes", 20000, func(int) []byte { return goBatch(1, 0, make([]byte, 500)) }, false},
		{"distinct threads", 100000, func(i int) []byte { return goBatch(1, uint64(i), nil) }, false},
		{"experimental", 100000, func(int) []byte { return []byte{goEvExperimentalBatch, 1, 1, 0, 0, 0} }, false},
		{"full", 300, func(i int) []byte { return goBatch(1, uint64(i%4), make([]byte, goMaxBatchSize)) }, true},
		{"65000 bytes", 300, func(i int) []byte { return goBatch(1, uint64(i%4), make([]byte, 65000)) }, false},
		{"stacks", 100, func(i int) []byte { return goBatch(1, 0, goTable(goEvStacks, uint64(1+i*30000), 0, goMaxBatchSize)) }, false},
		{"stacks of a frame", 100, func(i int) []byte { return goBatch(1, 0, goTable(goEvStacks, uint64(1+i*30000), 1, goMaxBatchSize)) }, false},
		{"strings", 100, func(i int) []byte { return goBatch(1, 0, goTable(goEvStrings, uint64(1+i*30000), 0, goMaxBatchSize)) }, false},
		{"CPU samples", 100, func(i int) []byte { return goBatch(1, 0, goTable(goEvCPUSamples, 0, 0, goMaxBatchSize)) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The count.
			b := NewGoBound(newGoStream(tt.n, tt.batch), 1<<62)
			if _, err := io.Copy(io.Discard, b); err != nil {
				t.Fatal(err)
			}
			// The heap, taken when x/exp/trace has read every batch.
			var base, held runtime.MemStats
			s := newGoStream(tt.n, tt.batch)
			s.atEnd = func() {
				runtime.GC()
				runtime.ReadMemStats(&held)
			}
			runtime.GC()
			runtime.ReadMemStats(&base)
			tr, err := xtrace.NewReader(s)
			if err != nil {
				t.Fatal(err)
			}
			tr.ReadEvent() // reads the generation: the trace ends within it
			heap := int64(held.HeapAlloc) - int64(base.HeapAlloc)
			t.Logf("%d batches of %d B: counted %d B, %.0f B a batch; heap %d B, %.0f B a batch",
				tt.n, b.bytes/int64(tt.n), b.cost, float64(b.cost)/float64(tt.n), heap, float64(heap)/float64(tt.n))
			if heap > b.cost {
				t.Errorf("the generation holds %d B of heap, counted %d", heap, b.cost)
			}
			if tt.tight && float64(b.cost) > 1.1*float64(heap) {
				t.Errorf("the generation holds %d B of heap, counted %d: more than 10%% above", heap, b.cost)
			}
		})
	}
}

// goSyncBatch returns the sync batch a generation needs: its clock's
// frequency and snapshot.
func goSyncBatch(gen uint64) []byte {
	d := []byte{50, 8} // EvSync, EvFrequency 1e9
	d = binary.AppendUvarint(d, 1e9)
	d = append(d, 51, 0, 0, 0, 0) // EvClockSnapshot
	return goBatch(gen, 0, d)
}

// TestGoQuietGenerations reads, with the collector off as the go row's
// process has it, generations that give no event, each under the bound:
// the Reader collects their garbage itself, once per bound read.
func TestGoQuietGenerations(t *testing.T) {
	const per, gens = 7000, 40 // empty batches: 7.2 MB counted, 4 MB of heap each
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s := newGoStream(gens*(per+2), func(i int) []byte {
		gen := uint64(1 + i/(per+2))
		switch i % (per + 2) {
		case 0:
			return goSyncBatch(gen)
		case per + 1:
			return []byte{goEvEndOfGeneration}
		}
		return goBatch(gen, 0, nil)
	})
	r, err := NewReaderOptions(s, "quiet.trace", ReaderOptions{MaxGoGeneration: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for err == nil {
		_, err = r.Next()
	}
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrNoGoHeap) || s.i != s.n {
		t.Errorf("err = %v after %d of %d batches, want %v at the end", err, s.i, s.n, ErrNoGoHeap)
	}
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d generations read: %d B allocated, %d B of heap at the end", gens, after.TotalAlloc-before.TotalAlloc, heap)
	if heap > 48<<20 {
		t.Errorf("the heap holds %d B at the end, want less than %d: the generations' garbage was left", heap, 48<<20)
	}
}
