package trace

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	rtrace "runtime/trace"
	"slices"
	"strings"
	"testing"
)

// TestGoClassesUpToDate runs the generator with the running toolchain and
// compares its output with the committed table of that release: the
// table must be the generator's, and the release's.
func TestGoClassesUpToDate(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("go not on PATH, and CI=true: cannot check the Go size-class tables: %v", err)
		}
		t.Skipf("go not on PATH: %v", err)
	}
	dir := t.TempDir()
	cmd := exec.Command(gobin, "run", "mkgoclasses.go", "-o", filepath.Join(dir, "out.go"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run mkgoclasses.go: %v\n%s", err, b)
	}
	want, err := os.ReadFile(filepath.Join(dir, "out.go"))
	if err != nil {
		t.Fatal(err)
	}
	// The file the generator names by default, for this release.
	cmd = exec.Command(gobin, "env", "GOVERSION")
	v, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	release := strings.TrimSpace(string(v)) // go1.26.8
	minor := strings.Split(strings.TrimPrefix(release, "go1."), ".")[0]
	name := "goclasses_go1" + minor + ".go"
	got, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		msg := "no table for the running toolchain (" + release + "): traces it writes are refused; add " + name + " with go generate (see goclasses.go)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what mkgoclasses.go generates from %s's source; run go generate ./lab/trace", name, release)
	}
}

// TestGoClasses checks the tables' properties that the importer relies on.
func TestGoClasses(t *testing.T) {
	for _, c := range goClassTables {
		if len(c.size) != len(c.npages) || len(c.size) < 2 || c.size[0] != 0 || c.npages[0] != 0 {
			t.Errorf("%s: %d sizes, %d page counts, class 0 %d B %d pages", c.release, len(c.size), len(c.npages), c.size[0], c.npages[0])
		}
		for k := 1; k < len(c.size); k++ {
			size, span := uint64(c.size[k]), uint64(c.npages[k])*c.pageSize
			if size <= uint64(c.size[k-1]) || size%c.minAlign != 0 || span < size {
				t.Errorf("%s: class %d: %d B in spans of %d B after %d B", c.release, k, size, span, c.size[k-1])
			}
		}
		if uint64(c.size[c.tinyClass]) != c.tinySize {
			t.Errorf("%s: the tiny class %d holds %d B, want %d", c.release, c.tinyClass, c.size[c.tinyClass], c.tinySize)
		}
		if got, err := goClassesFor(c.format); got != c || err != nil {
			t.Errorf("goClassesFor(%d) = %v, %v; want %s", c.format, got, err, c.release)
		}
	}
	if _, err := goClassesFor(23); err == nil || !strings.Contains(err.Error(), "go 1.23") || !strings.Contains(err.Error(), "goclasses.go") {
		t.Errorf("goClassesFor(23) = %v, want an error naming the format and how to add it", err)
	}
}

// TestGoObjectSize is the table test of how an object's size comes from
// the kind and class of its span, as traceallocfree.go encodes them:
// kindclass = spanclass << 1, spanclass = sizeclass << 1 | noscan, and 1
// for a span that holds no heap objects.
func TestGoObjectSize(t *testing.T) {
	c := &goClassesGo126
	kind := func(sizeclass uint64, noscan bool) goSpanKind {
		sc := sizeclass << 1
		if noscan {
			sc |= 1
		}
		return goSpanKind(sc << 1)
	}
	tests := []struct {
		name    string
		k       goSpanKind
		npages  uint64
		want    uint64
		heap    bool
		noscan  bool
		wantErr string
	}{
		{"8 B objects", kind(1, false), 1, 8, true, false, ""},
		{"16 B pointer-free: the tiny class", kind(2, true), 1, 16, true, true, ""},
		{"64 B sessions", kind(6, true), 1, 64, true, true, ""},
		{"1 KiB buffers", kind(32, true), 1, 1024, true, true, ""},
		{"4 KiB buffers", kind(44, true), 1, 4096, true, true, ""},
		{"1408 B: a class of 2 pages", kind(35, false), 1, 0, true, false, "of 1 pages, where go1.26's are of 2"},
		{"the largest small class", kind(67, true), 4, 32768, true, true, ""},
		{"a large object: its span", kind(0, true), 5, 5 * 8192, true, true, ""},
		{"a large object with pointers", kind(0, false), 1, 8192, true, false, ""},
		{"no such class", kind(68, false), 1, 0, true, false, "68 classes"},
		{"0 pages", kind(0, false), 0, 0, true, false, "0 pages"},
		{"a stack span", goSpanKind(1), 4, 0, false, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.k.heap() != tt.heap || (tt.heap && tt.k.noscan() != tt.noscan) {
				t.Fatalf("kind %d: heap %v, noscan %v; want %v, %v", tt.k, tt.k.heap(), tt.k.noscan(), tt.heap, tt.noscan)
			}
			if !tt.heap {
				return
			}
			got, err := c.elemSize(tt.k, tt.npages)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("elemSize(%d, %d) = %d, %v; want an error saying %q", tt.k, tt.npages, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("elemSize(%d, %d) = %d, %v; want %d", tt.k, tt.npages, got, err, tt.want)
			}
		})
	}
}

func TestGoHeader(t *testing.T) {
	tests := []struct {
		in     string
		format int
		ok     bool
	}{
		{"go 1.26 trace\x00\x00\x00", 26, true},
		{"go 1.23 trace\x00\x00\x00\x01", 23, true},
		{"go 1.5 trace\x00\x00\x00", 5, true},
		{"go 1.26 trace\x00\x00", 0, false},
		{"go 1. trace\x00\x00\x00", 0, false},
		{"go 1.2345 trace\x00\x00\x00", 0, false},
		{"# carve trace v1\n", 0, false},
	}
	for _, tt := range tests {
		if f, ok := goHeader([]byte(tt.in)); f != tt.format || ok != tt.ok {
			t.Errorf("goHeader(%q) = %d, %v; want %d, %v", tt.in, f, ok, tt.format, tt.ok)
		}
		if got := detect([]byte(tt.in)) == Go; got != tt.ok {
			t.Errorf("detect(%q) == Go: %v, want %v", tt.in, got, tt.ok)
		}
	}
}

// TestGoTrace reads the golden Go trace and checks what the importer
// promises beyond the golden text: the objects alive at the start come
// first, the metrics are kept, the tiny objects packed, and the program's
// types labelled with their sizes and pointer bytes.
func TestGoTrace(t *testing.T) {
	r, err := Open("testdata/labelled/go.trace")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Format() != Go || r.GoRelease() != "go1.26" {
		t.Fatalf("format %v, release %q; want go, go1.26", r.Format(), r.GoRelease())
	}
	evs := readAll(t, r)
	st := r.Stats()
	if st.GoAtStart == 0 || st.TinyPacked == 0 || st.GoStacks == 0 || st.UnknownTypes != 0 || st.GoNoSpan != 0 || st.MissedFrees != 0 {
		t.Errorf("Stats = %+v, want objects at the start, tiny objects packed, stacks seen, no unknown type, span or missed free", st)
	}
	for i, e := range evs[:st.GoAtStart] {
		if e.Op != Alloc {
			t.Fatalf("event %d %v: the objects alive at the start must come first", i, e)
		}
	}
	heap := r.GoHeap()
	if len(heap) == 0 || heap[len(heap)-1].Objects == 0 || heap[len(heap)-1].Goal == 0 {
		t.Errorf("GoHeap() = %v, want samples of both metrics", heap)
	}
	for _, tt := range []struct {
		name           string
		size, ptrBytes uint64
	}{
		{"main.session", 32, 0},
		{"main.conn", 32, 16}, // s and buf's pointer: 16 bytes may hold pointers
		{"uint8", 1, 0},
	} {
		found := false
		for id := uint32(1); int(id) <= r.Labels().Len(); id++ {
			l, _ := r.Labels().Label(id)
			if l.Name != tt.name {
				continue
			}
			found = true
			size, _ := l.Uint(AttrSize)
			ptr, _ := l.Uint(AttrPtrBytes)
			if size != tt.size || ptr != tt.ptrBytes {
				t.Errorf("%s: size %d, pointer bytes %d; want %d, %d", tt.name, size, ptr, tt.size, tt.ptrBytes)
			}
		}
		if !found {
			t.Errorf("no label %s", tt.name)
		}
	}
	// The 40 KiB buffer is a large object: a span of 5 pages.
	large := false
	for _, e := range evs {
		large = large || e.Op == Alloc && e.Size == 5*8192
	}
	if !large {
		t.Errorf("no object of 40 KiB (5 pages)")
	}

	// With GoStacks, the stacks are objects too.
	rs, err := OpenOptions("testdata/labelled/go.trace", ReaderOptions{GoStacks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	withStacks := readAll(t, rs)
	stacks := 0
	for _, e := range withStacks {
		if e.Op == Alloc && rs.Labels().Name(e.Label) == goStackLabel {
			stacks++
			if e.Size < 2048 || e.Size&(e.Size-1) != 0 {
				t.Errorf("a stack of %d B", e.Size)
			}
		}
	}
	if int64(stacks) != rs.Stats().GoStacks || len(withStacks) <= len(evs) {
		t.Errorf("%d stacks allocated, %d seen; %d events with stacks, %d without", stacks, rs.Stats().GoStacks, len(withStacks), len(evs))
	}
}

// TestGoTraceErrors checks the errors of Go traces that cannot be read.
func TestGoTraceErrors(t *testing.T) {
	golden, err := os.ReadFile("testdata/labelled/go.trace")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   []byte
		is   error
		want string
	}{
		{"unknown release", []byte("go 1.23 trace\x00\x00\x00"), nil, "format go 1.23"},
		{"cut short", golden[:len(golden)/2], ErrGoTrace, "go.trace: event"},
		{"not a trace", []byte("go 1.26 trace\x00\x00\x00garbage"), ErrGoTrace, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewReader(bytes.NewReader(tt.in), "go.trace", Auto)
			if err == nil {
				for err == nil {
					_, err = r.Next()
				}
			}
			if err == io.EOF || tt.is != nil && !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one wrapping %v, saying %q", err, tt.is, tt.want)
			}
		})
	}
}

// TestGoTraceNoHeap traces this test process, whose GODEBUG has no
// traceallocfree=1: the trace has no heap events, and the Reader says how
// to record one.
func TestGoTraceNoHeap(t *testing.T) {
	if strings.Contains(os.Getenv("GODEBUG"), "traceallocfree=1") {
		t.Skip("the test runs with GODEBUG=traceallocfree=1")
	}
	var buf bytes.Buffer
	if err := rtrace.Start(&buf); err != nil {
		t.Skipf("runtime/trace: %v (another trace is running)", err)
	}
	sink := make([][]byte, 0, 100)
	for range 100 {
		sink = append(sink, make([]byte, 1000))
	}
	rtrace.Stop()
	r, err := NewReader(&buf, "self.trace", Auto)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Next()
	if !errors.Is(err, ErrNoGoHeap) || !strings.Contains(err.Error(), "GODEBUG=traceallocfree=1") {
		t.Errorf("Next = %v, want ErrNoGoHeap saying how to record (%d buffers)", err, len(sink))
	}
}

// TestGoLateFree drives the importer as a trace whose sweeper's free of
// an object comes after another P's allocation into the object's slot
// (the runtime stamps its frees after it has made the slots free): the
// allocation frees the old object (a missed free), the late free then
// frees nothing, and the new object stays live until its own free. A
// span freed with objects live gets the same treatment.
func TestGoLateFree(t *testing.T) {
	r := &Reader{labels: &Labels{}, nextID: 1}
	r.gotr = &goState{classes: &goClassesGo126, maxPages: goClassesGo126.maxSmallPages(), info: true,
		pageSize: 8192, minAlign: 8, types: map[uint64]goType{}, spans: map[uint64]*goSpan{}}
	g := r.gotr
	const page = 100
	k := goSpanKind(6<<1|1) << 1      // 64-byte pointer-free objects
	var slot uint64 = page * 8192 / 8 // the span's first slot, as an object id
	steps := []func() error{
		func() error { return r.goSpan(page, 1, k) },
		func() error { return r.goAlloc(slot, 0) },      // object 1
		func() error { return r.goAlloc(slot, 0) },      // object 2 in the same slot: 1's free missed...
		func() error { r.goFree(slot); return nil },     // ...and here it is, late: 2 stays
		func() error { r.goFree(slot); return nil },     // 2's own free
		func() error { return r.goAlloc(slot, 0) },      // object 3
		func() error { r.goSpanFree(page); return nil }, // its span freed: 3's free made here
		func() error { r.goFree(slot); return nil },     // 3's free, late
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	var got []string
	for _, e := range g.queue {
		got = append(got, e.String())
	}
	want := []string{"a 1 64", "f 1", "a 2 64", "f 2", "a 3 64", "f 3"}
	if !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	if s := r.stats; s.UnknownFrees != 0 || s.MissedFrees != 2 || s.LateFrees != 2 {
		t.Errorf("stats: %d unknown frees, %d missed, %d late; want 0, 2, 2", s.UnknownFrees, s.MissedFrees, s.LateFrees)
	}
}
