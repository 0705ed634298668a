package trace

import "fmt"

//go:generate go run mkgoclasses.go

// goClasses is the Go heap's size classes in one Go release, generated
// from its source by mkgoclasses.go. The Go importer sizes each object by
// the span that holds it: a span of class c > 0 holds objects of size[c]
// bytes and is npages[c] pages long; a span of class 0 holds one large
// object, as long as the span.
type goClasses struct {
	release   string // "go1.26"
	format    int    // the execution trace format it writes: "go 1.<format> trace"
	pageSize  uint64 // the heap's page
	minAlign  uint64 // the heap's minimum alignment: the unit of object IDs
	tinySize  uint64 // the tiny allocator's block
	tinyClass uint8  // the class of the tiny blocks (pointer-free spans)
	size      []uint32
	npages    []uint8
}

// goClassTables are the releases whose traces the Go importer reads. To
// add one, run mkgoclasses.go with that release's toolchain (for
// example, with golang.org/dl's go1.27.0 on the PATH as go:
// GOTOOLCHAIN=go1.27.0 go generate ./lab/trace), which writes
// goclasses_go127.go, and list its table here. A release that writes the
// same trace format as another listed (Go 1.24 wrote go 1.23's) needs
// the same classes: goClassesFor refuses a second table of one format.
var goClassTables = []*goClasses{&goClassesGo126}

// goClassesFor returns the table of the release that writes trace format
// go 1.<format>.
func goClassesFor(format int) (*goClasses, error) {
	var known []string
	for _, t := range goClassTables {
		if t.format == format {
			return t, nil
		}
		known = append(known, fmt.Sprintf("go 1.%d (%s)", t.format, t.release))
	}
	return nil, fmt.Errorf("a Go execution trace of format go 1.%d, whose heap size classes carve does not know "+
		"(it knows those of %v; see lab/trace/goclasses.go to add a release)", format, known)
}

// maxSmallPages returns the most pages a span of a small class takes.
func (t *goClasses) maxSmallPages() uint64 {
	var n uint8
	for _, p := range t.npages {
		n = max(n, p)
	}
	return uint64(n)
}

// A goSpanKind is a span's kind and class as an execution trace encodes
// them (the runtime's traceSpanTypeAndClass, in traceallocfree.go): 1 for
// a span that holds no heap objects (goroutine stacks, the runtime's own
// memory), or the span class shifted left by one for a span of the heap,
// the span class being the size class shifted left by one with the low
// bit set for a span of pointer-free objects ("noscan").
type goSpanKind uint64

// heap reports whether the span holds heap objects.
func (k goSpanKind) heap() bool { return k&1 == 0 }

// class returns the size class of a heap span.
func (k goSpanKind) class() uint64 { return uint64(k) >> 2 }

// noscan reports whether a heap span holds pointer-free objects.
func (k goSpanKind) noscan() bool { return k>>1&1 == 1 }

// elemSize returns the size of the objects of a heap span of kind k and
// npages pages, checking the span against the table: the class must be
// one of the release's, and a small class's span as long as the table
// says.
func (t *goClasses) elemSize(k goSpanKind, npages uint64) (uint64, error) {
	c := k.class()
	switch {
	case npages == 0:
		return 0, fmt.Errorf("a span of 0 pages")
	case c >= uint64(len(t.size)):
		return 0, fmt.Errorf("a span of size class %d: %s has %d classes", c, t.release, len(t.size))
	case c == 0:
		if npages > 1<<40/t.pageSize {
			return 0, fmt.Errorf("a span of %d pages", npages)
		}
		return npages * t.pageSize, nil
	case npages != uint64(t.npages[c]):
		return 0, fmt.Errorf("a span of size class %d (%d B objects) of %d pages, where %s's are of %d: "+
			"the trace was written by a Go release whose size classes differ", c, t.size[c], npages, t.release, t.npages[c])
	}
	return uint64(t.size[c]), nil
}

// GoRequests returns the requests an object that a Go execution trace
// sizes at size bytes may stand for: the importer sizes each object by
// its span's class (the program asked for any of lo to hi = size bytes,
// lo one byte above the class below), and a large object, a span of its
// own, by its pages (lo one byte above a page less, and above the
// largest class). A size that is no class of the newest table Go
// importer knows stands for itself.
func GoRequests(size uint64) (lo, hi uint64) {
	t := goClassTables[len(goClassTables)-1]
	largest := uint64(t.size[len(t.size)-1])
	if size > largest {
		if size%t.pageSize != 0 {
			return size, size
		}
		return max(size-t.pageSize, largest) + 1, size
	}
	below := uint64(0)
	for _, c := range t.size[1:] {
		if uint64(c) == size {
			return below + 1, size
		}
		below = uint64(c)
	}
	return size, size
}
