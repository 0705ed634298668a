package trace

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/zstd"
)

// MaxLive is the most objects an importer tracks as live at once. Past it
// the Reader returns an error wrapping ErrTooManyLive rather than grow
// without bound on a hostile or broken trace. A real trace that needs more
// is a trace of 67 million live blocks.
const MaxLive = 1 << 26

// Reader reads the events of a trace, streamed: it keeps one buffer of
// MaxLine bytes and, for the importers, one table entry per live object;
// never the trace. (A Go execution trace is read a generation at a time,
// by x/exp/trace, bounded by ReaderOptions.MaxGoGeneration, with a table
// entry per live object and per span.) The
// labels of the events and the Go heap's samples are kept as they come:
// see Labels and GoHeap.
//
// Importers (every format but Native) turn the addresses of the recorded
// program into object IDs 1, 2, 3... in order of birth. An address names
// its object from the allocation that returned it to the free that gave it
// back; then it may name another. What an importer does with events that
// do not fit that life (a free of an address that is not live, say) is
// described in the package documentation and counted in [Reader.Stats].
//
// A Reader is not safe for concurrent use.
type Reader struct {
	name   string
	format Format
	lines  *lines
	err    error // sticky: io.EOF at the end, or the error that stopped reading
	ev     Event // Next's event

	closers []io.Closer // decompressor, then file (Open)

	lastLines []int64 // the line of each event of the last Read

	stats  ReaderStats
	labels *Labels      // the labels of a native v2 trace, a Go trace or a C trace (its sites); else nil
	goHeap goHeapSeries // the Go heap's metrics, of those traces
	cycles goCycles     // a Go program's collections (GoCycles)
	rss    processRSS   // the recorded program's RSS (ProcessRSS)

	// Importers' state.
	addrs  addrMap // live address -> ID
	nextID uint64  // the ID the next object gets
	tid    uint32  // the thread of the line being read
	site   uint32  // the label of the line's call stack (a C trace's), 0 for none
	pend   Event   // an event due after the one just returned
	npend  bool

	imp     importer         // the format's own: its state between lines
	fast    bufferedImporter // imp, if it reads lines in the buffer; else nil
	stream  streamImporter   // imp, if it reads no lines; else nil
	cstacks cStacks          // a C trace's call stacks (carve's recorder, heaptrack)
	gotr    *goState         // a Go execution trace's
}

// ReaderStats counts what a Reader read, and what it had to make of the
// lines that do not fit an object's life. Events counts what Next and Read
// returned, synthetic events included.
type ReaderStats struct {
	Lines  int64 // lines read (0 for a Go execution trace, which is binary)
	Events int64 // events returned
	// Skipped counts lines that carry no event: headers, comments, blank
	// lines, and the records and messages of other kinds that a format's
	// files hold (heaptrack's stack traces, valgrind's reports...).
	Skipped int64
	// NullFrees counts free(NULL) calls: dropped.
	NullFrees int64
	// Failed counts allocations and reallocs that returned NULL: dropped,
	// the program got no memory (a failed realloc leaves its block live).
	Failed int64
	// UnknownFrees counts frees of an address that is not live in the
	// trace (allocated before recording began, or freed twice): each is
	// returned as a Free of a fresh ID, never allocated, so that a
	// replayer counts it as a free of an unknown ID.
	UnknownFrees int64
	// UnknownReallocs counts reallocs of an address that is not live:
	// each is returned as an Alloc of a fresh ID of the new size (the
	// block exists from then on; its old size is unknown).
	UnknownReallocs int64
	// MissedFrees counts allocations that returned an address still live
	// in the trace: the recorder missed the free (heaptrack does not
	// record realloc(p, 0), for one). The importer returns a Free of the
	// old object first, then the allocation.
	MissedFrees int64
	// Invisible counts allocations recorded without their address
	// (valgrind 3.20 and later print none for posix_memalign and
	// aligned_alloc): dropped; their frees then count as UnknownFrees.
	Invisible int64
	// ThreadsDone counts AOSP thread_done records: dropped.
	ThreadsDone int64

	// The counts of a Go execution trace (UnknownFrees and MissedFrees
	// count there too).

	// LateFrees counts the frees of objects the importer had freed
	// already (a MissedFree: another P's allocation into the object's
	// slot, or its span's free, came first in the trace's order): they
	// free nothing.
	LateFrees int64
	// GoAtStart counts the heap objects alive when the trace started,
	// returned as allocations before those the program made.
	GoAtStart int64
	// TinyPacked counts allocations into a 16-byte tiny block already
	// live: the runtime packs small pointer-free objects into such
	// blocks, and the block is one object of the trace, of the size of
	// the block and the type of the first object put in it.
	TinyPacked int64
	// UnknownTypes counts objects whose type the generation's type table
	// does not hold: they carry no label.
	UnknownTypes int64
	// GoNoSpan counts objects in no span the trace showed: sized by
	// their type (or the heap's minimum alignment).
	GoNoSpan int64
	// GoStacks counts the goroutine stacks the trace showed (returned as
	// objects with ReaderOptions.GoStacks, left out otherwise).
	GoStacks int64
	// GoBytes and GoSiteBytes are the bytes of the Go objects allocated
	// (their sizes, their spans' classes) and of those whose label
	// carries a site (ReaderOptions.Sites), GoShareBytes of those whose
	// site was drawn by share.
	GoBytes, GoSiteBytes, GoShareBytes uint64
}

// ReaderOptions tune a Reader. The zero value is NewReader's with Auto.
type ReaderOptions struct {
	// Format is the trace's format; Auto detects it.
	Format Format
	// GoStacks makes the reader of a Go execution trace return the
	// goroutine stacks as objects too, labelled "goroutine stack", of
	// their size, allocated and freed when the runtime did. They are left
	// out otherwise: they are no heap objects (a program cannot move its
	// stacks into a pool), and the heap's metrics do not count them.
	GoStacks bool
	// MaxGoGeneration bounds the memory one generation of a Go execution
	// trace may cost the reader, which holds a whole generation before
	// its first event (see DefaultMaxGoGeneration, the default, for what
	// that allows): past it the Reader returns an error wrapping
	// ErrGoGeneration. 0 is the default.
	MaxGoGeneration int64
	// ProcessRSS is the recorded program's RSS, sampled by the machine's
	// clocks while it ran, in the order taken, for the reader of a Go
	// execution trace to place among the events by the trace's clock
	// snapshots (see Reader.ProcessRSS); ProcessRSSOf says which process
	// they are of (RSSTestBinary, RSSProgram or RSSValgrind). Readers of
	// other formats ignore them.
	ProcessRSS   []ClockedRSS
	ProcessRSSOf string
	// Sites, when not nil, gives the reader of a Go execution trace the
	// allocation site of an object of a size, by its ID ("" for none),
	// and whether it was drawn by share among the sites of that size:
	// each object's label is then its type and that site (AttrSite, and
	// AttrSiteByShare). Readers of other formats ignore it.
	Sites func(size, id uint64) (site string, byShare bool)
	// Symbolizer names the return addresses of the call stacks of a C
	// trace (carve's recorder's log, heaptrack's raw data), each
	// allocation labelled with its site (see stack.go); nil names them
	// by module and offset. Readers of other formats ignore it.
	Symbolizer Symbolizer
}

// NewReader returns a Reader of the trace in rd. name is the trace's name
// in errors (a file name, say). A gzip or zstd stream is decompressed
// transparently, recognized by its magic bytes. With format Auto the
// format is detected from the first lines (see the package
// documentation); detection failing is an error wrapping ErrDetect.
//
// NewReader reads up to MaxLine bytes of rd before it returns, to detect
// the format, and to read the header of a native trace (its version) or
// of a Go execution trace (a release whose size classes carve does not
// know is refused here). Close the Reader when done if rd was compressed
// (zstd decoding holds resources).
func NewReader(rd io.Reader, name string, format Format) (*Reader, error) {
	return NewReaderOptions(rd, name, ReaderOptions{Format: format})
}

// NewReaderOptions is NewReader with options.
func NewReaderOptions(rd io.Reader, name string, opt ReaderOptions) (*Reader, error) {
	format := opt.Format
	r := &Reader{name: name, nextID: 1}
	rd, err := r.decompress(rd)
	if err != nil {
		r.Close()
		return nil, err
	}
	r.lines = newLines(rd)
	if format == Auto {
		r.lines.fillAll()
		if err := r.lines.err; err != nil && err != io.EOF {
			r.Close()
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if r.lines.w == 0 {
			r.Close()
			return nil, fmt.Errorf("%s: %w: the file is empty", name, ErrDetect)
		}
		if format = detect(r.lines.buf[:r.lines.w]); format == Auto {
			r.Close()
			return nil, fmt.Errorf("%s: %w (want the first lines of a trace of one of the formats %s)", name, ErrDetect, formatList(Native))
		}
	}
	if format >= numFormats() || formats[format].open == nil {
		r.Close()
		return nil, fmt.Errorf("trace: NewReader(%q): unknown format %d", name, format)
	}
	imp, err := formats[format].open(r, opt)
	if err != nil {
		r.Close()
		return nil, err
	}
	r.imp = imp
	r.fast, _ = imp.(bufferedImporter)
	r.stream, _ = imp.(streamImporter)
	r.format = format
	return r, nil
}

// Open opens the trace file at path, compressed or not, and returns a
// Reader of it with its format detected. Close the Reader to close the
// file.
func Open(path string) (*Reader, error) {
	return OpenOptions(path, ReaderOptions{})
}

// OpenFormat is Open with the format given (Auto detects it).
func OpenFormat(path string, format Format) (*Reader, error) {
	return OpenOptions(path, ReaderOptions{Format: format})
}

// OpenOptions is Open with options.
func OpenOptions(path string, opt ReaderOptions) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	r, err := NewReaderOptions(f, path, opt)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.closers = append(r.closers, f)
	return r, nil
}

// zstdMaxWindow bounds the memory a zstd stream may make the decoder
// take: 128 MiB, the largest window zstd writes without --long.
const zstdMaxWindow = 1 << 27

// decompress returns rd, decompressed if it starts with the magic bytes
// of gzip (1f 8b) or zstd (28 b5 2f fd).
func (r *Reader) decompress(rd io.Reader) (io.Reader, error) {
	var magic [4]byte
	n, err := io.ReadFull(rd, magic[:])
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, fmt.Errorf("%s: %w", r.name, err)
	}
	head := magic[:n]
	rd = io.MultiReader(bytes.NewReader(head), rd)
	switch {
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		z, err := gzip.NewReader(rd)
		if err != nil {
			return nil, fmt.Errorf("%s: gzip: %w", r.name, err)
		}
		r.closers = append(r.closers, z)
		return decompressed{z, "gzip"}, nil
	case bytes.Equal(head, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		z, err := zstd.NewReader(rd,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(zstdMaxWindow),
			zstd.WithDecoderMaxMemory(zstdMaxWindow))
		if err != nil {
			return nil, fmt.Errorf("%s: zstd: %w", r.name, err)
		}
		r.closers = append(r.closers, zstdCloser{z})
		return decompressed{z, "zstd"}, nil
	}
	return rd, nil
}

// decompressed names the compression in the errors of a decompressor,
// and says which of the two ways a compressed file fails: it ends before
// its data does (truncated), or its data cannot be what the compressor
// wrote (corrupt).
type decompressed struct {
	rd   io.Reader
	name string
}

func (d decompressed) Read(p []byte) (int, error) {
	n, err := d.rd.Read(p)
	switch {
	case err == nil, err == io.EOF:
		return n, err
	case errors.Is(err, io.ErrUnexpectedEOF):
		return n, fmt.Errorf("%s: truncated: the file ends before its compressed data does (%w)", d.name, err)
	case errors.Is(err, zstd.ErrWindowSizeExceeded):
		return n, fmt.Errorf("%s: corrupt: a frame asks for a window above the %d MiB a trace needs (%w)", d.name, zstdMaxWindow>>20, err)
	}
	return n, fmt.Errorf("%s: corrupt: %w", d.name, err)
}

// zstdCloser adapts the zstd decoder's Close, which returns nothing.
type zstdCloser struct{ d *zstd.Decoder }

func (z zstdCloser) Close() error { z.d.Close(); return nil }

// Close releases the decompressor and closes the file Open opened. It
// does not close the io.Reader given to NewReader.
func (r *Reader) Close() error {
	var errs []error
	for _, c := range r.closers {
		errs = append(errs, c.Close())
	}
	r.closers = nil
	return errors.Join(errs...)
}

// Format returns the trace's format (the one detected, with Auto).
func (r *Reader) Format() Format { return r.format }

// Name returns the name given to NewReader.
func (r *Reader) Name() string { return r.name }

// Stats returns the counts so far.
func (r *Reader) Stats() ReaderStats {
	s := r.stats
	s.Lines = r.lines.n
	return s
}

// Labels returns the table of the labels that the events carry: those of
// a native trace of version 2, the types of a Go execution trace; nil for
// the other formats. It grows as the trace is read: a label is in it
// before the first event that carries it is returned.
func (r *Reader) Labels() *Labels { return r.labels }

// Next returns the next event, or io.EOF after the last one. A line that
// does not parse stops the Reader with an *Error; every later call
// returns the same error.
func (r *Reader) Next() (Event, error) {
	// The event is parsed into the Reader, not a local: the parser is
	// called through an interface, so a local's address would escape
	// and cost an allocation per event.
	if r.next(&r.ev) {
		r.stats.Events++
		return r.ev, nil
	}
	return Event{}, r.err
}

// Read reads up to len(dst) events into dst. It returns n > 0 and a nil
// error, or 0 and the error that ends the trace (io.EOF at the end). It
// is the faster way to read: one call per batch, not per event.
func (r *Reader) Read(dst []Event) (n int, err error) {
	// Events is counted as each event is read: the samples of the Go
	// heap that the events' lines carry are placed by it.
	if cap(r.lastLines) < len(dst) {
		r.lastLines = make([]int64, len(dst))
	}
	r.lastLines = r.lastLines[:0]
	for n < len(dst) && r.next(&dst[n]) {
		n++
		r.stats.Events++
		r.lastLines = append(r.lastLines, r.lines.n)
	}
	if n > 0 {
		return n, nil
	}
	return 0, r.err
}

// Position returns the file of the trace and the line the i-th event of
// the last Read came from (0 for a format without lines: a Go execution
// trace, whose importer gives its events from the trace's batches).
func (r *Reader) Position(i int) (file string, line int64) {
	if r.gotr != nil || i < 0 || i >= len(r.lastLines) {
		return r.name, 0
	}
	return r.name, r.lastLines[i]
}

// next stores the next event in ev; at the end, or on an error, it
// returns false and leaves the reason in r.err.
func (r *Reader) next(ev *Event) bool {
	for {
		if r.npend {
			*ev = r.pend
			r.npend = false
			return true
		}
		if r.err != nil {
			return false
		}
		if r.stream != nil {
			return r.stream.next(r, ev)
		}
		l := r.lines
		if r.fast != nil {
			// The common lines of the format, read in the buffer without
			// finding their end first.
			ok, err := r.fast.buffered(r, ev)
			if err != nil {
				r.err = err
				return false
			}
			if ok {
				return true
			}
		}
		// The common case of lines.next, inlined: a whole line buffered.
		if i := bytes.IndexByte(l.buf[l.r:l.w], '\n'); i >= 0 {
			line := trimCR(l.buf[l.r : l.r+i])
			l.r += i + 1
			l.n++
			ok, err := r.imp.line(r, line, false, ev)
			if err != nil {
				r.err = err
				return false
			}
			if ok {
				return true
			}
			continue
		}
		line, cut, err := l.next()
		if err != nil {
			r.err = r.end(err)
			continue
		}
		ok, err := r.imp.line(r, line, cut, ev)
		if err != nil {
			r.err = err
			return false
		}
		if ok {
			return true
		}
	}
}

// end turns the end of the stream into the Reader's last word: io.EOF,
// or an error if the format says the trace stopped short.
func (r *Reader) end(err error) error {
	if err != io.EOF {
		return fmt.Errorf("%s: %w", r.name, err)
	}
	whole, err := r.imp.end(r)
	if err != nil {
		return err
	}
	if r.stats.Events == 0 && r.stats.Skipped >= r.lines.n && !whole {
		// Lines, and not one of them a call of the format's (an event, a
		// failed call, a free of NULL): a file taken for what it is not,
		// most likely (a carve trace of allocations alone, without its
		// header, reads as heaptrack's records of allocation info).
		return fmt.Errorf("%s: %w in its %d lines, read in the %s format (a carve trace starts with %q)", r.name, ErrNoEvent, r.lines.n, r.format, nativeHeader)
	}
	return io.EOF
}

// An importer reads one format's lines into events, driven by the
// Reader: it is the format's state between lines, in its own type, made
// by the format's open (see formats), and its methods take the Reader for
// the bookkeeping all importers share (addresses to IDs, the stats, the
// labels).
type importer interface {
	// line reads one line into ev (cut: the line was longer than
	// MaxLine, and this is its start) and reports whether it held an
	// event.
	line(r *Reader, line []byte, cut bool, ev *Event) (bool, error)
	// end is called at the end of the stream: it returns the error of a
	// trace that stopped short, else whole reports whether the trace is
	// complete even with no event in it (a native trace's header says
	// so); when it is not, a trace of lines without one event is an
	// error wrapping ErrNoEvent.
	end(r *Reader) (whole bool, err error)
}

// A bufferedImporter reads the common lines of its format in the
// Reader's buffer before the Reader looks for the line's end: it returns
// false, having read nothing, for a line it leaves to line.
type bufferedImporter interface {
	buffered(r *Reader, ev *Event) (bool, error)
}

// A streamImporter reads a format that is no lines (a Go execution
// trace): the Reader asks it for each event, as next does.
type streamImporter interface {
	next(r *Reader, ev *Event) bool
}

// skip counts a line that carries no event.
func (r *Reader) skip() (bool, error) {
	r.stats.Skipped++
	return false, nil
}

// The importers' bookkeeping: addresses to IDs.

// alloc records that addr now holds a new object: it fills ev with the
// object's ID and the line's thread, and returns the event the caller
// completes as the allocation (its Op, Size, Align). If addr was live,
// the recorder missed its free: ev becomes that free, and the returned
// event is r.pend, the allocation that waits for the next read.
func (r *Reader) alloc(addr uint64, ev *Event) (*Event, error) {
	id := r.nextID
	r.nextID++
	old, replaced := r.addrs.put(addr, id)
	if !replaced && r.addrs.len() > MaxLive {
		return nil, r.liveError()
	}
	*ev = Event{ID: id, Thread: r.tid, Label: r.site}
	if replaced {
		r.stats.MissedFrees++
		*ev = Event{Op: Free, ID: old, Thread: r.tid}
		r.pend = Event{ID: id, Thread: r.tid, Label: r.site}
		r.npend = true
		return &r.pend, nil
	}
	return ev, nil
}

// born records an allocation that returned addr and fills ev with it, as
// like says (Op, N, Size, Align); a call that returned NULL is counted in
// Failed and yields no event.
func (r *Reader) born(addr uint64, ev *Event, like Event) (bool, error) {
	if addr == 0 {
		r.stats.Failed++
		return false, nil
	}
	e, err := r.alloc(addr, ev)
	if err != nil {
		return false, err
	}
	e.Op, e.N, e.Size, e.Align = like.Op, like.N, like.Size, like.Align
	return true, nil
}

// free records that addr was freed and fills ev with the Free.
func (r *Reader) free(addr uint64, ev *Event) {
	id, ok := r.addrs.del(addr)
	if !ok {
		r.stats.UnknownFrees++
		id = r.nextID
		r.nextID++
	}
	*ev = Event{Op: Free, ID: id, Thread: r.tid}
}

// realloc records that the object at old moved to addr (or stayed) with
// size bytes, and fills ev with the Realloc, or with an Alloc when old is
// not live.
func (r *Reader) realloc(old, addr, size uint64, ev *Event) error {
	id, ok := r.addrs.del(old)
	if !ok {
		r.stats.UnknownReallocs++
		e, err := r.alloc(addr, ev)
		if err != nil {
			return err
		}
		e.Op, e.Size = Alloc, size
		return nil
	}
	*ev = Event{Op: Realloc, ID: id, Size: size, Thread: r.tid, Label: r.site}
	if other, replaced := r.addrs.put(addr, id); replaced {
		// addr held another live object: the recorder missed its free.
		r.stats.MissedFrees++
		r.pend = *ev
		r.npend = true
		*ev = Event{Op: Free, ID: other, Thread: r.tid}
	}
	return nil
}
