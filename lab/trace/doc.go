// Package trace is the lab's event model and its formats: what a program
// asked of its allocator, as a stream of events on objects, read from the
// recordings of the usual tools and from Go execution traces, and written
// in carve's own format. The generators of the block-allocator article's
// scenarios and of synthetic workloads are package gen, the summaries
// package summary (see "Generators and summaries" below).
//
// See package lab for the lab's overview; the replayer that drives
// allocators with these events is package replay.
//
// # Events
//
// A trace is a sequence of [Event] values, each an [Op] on an object
// named by an ID:
//
//	Alloc     ID Size [Align]   malloc, operator new (aligned new: with Align)
//	Calloc    ID N Size         calloc: N elements, Size bytes in all, zeroed
//	Memalign  ID Align Size     memalign, posix_memalign, aligned_alloc
//	Realloc   ID Size           realloc of a live object, which keeps its ID
//	Free      ID                free, operator delete
//
// An ID names an object from its allocation to its free. Importers number
// objects 1, 2, 3... in order of birth and never reuse an ID; the native
// format carries any IDs, and may reuse one once its object is freed.
// Events also carry the recording thread (AOSP traces and the native
// format have them; the other formats record 0). Replay is single-threaded, in the recorded order.
//
// # Labels
//
// An allocation may carry a label, which says what the object is: for a
// Go execution trace, its type. A [Label] is a name and attributes (for a
// Go type, [AttrSize] and [AttrPtrBytes]: its size, and how many of its
// bytes may hold pointers, 0 for a pointer-free type). Labels are
// interned in a [Labels] table, numbered 1, 2, 3...; the event's Label
// field is the number, 0 for none. The table travels with the events: a
// [Reader] has one for the formats that carry labels (Reader.Labels), and
// a consumer of any [Source] gets it with [LabelsOf] (the optional
// interface [LabeledSource]). A Realloc keeps its object's label, a Free
// ends it.
//
// The label is a field of the Event, which took Event from 32 bytes to
// 40, rather than a table beside the events: a label then reaches every
// consumer of any Source (the replayer, a router that sends a type's
// objects to a pool) with the event it belongs to, in any batch. Parsing
// (BenchmarkParse) and replaying (package replay's BenchmarkOverhead)
// were measured before and after, side by side: the difference is within
// the noise of the measurement.
//
// # Reading
//
// [NewReader] reads a trace from any io.Reader, streamed: it keeps one
// buffer of [MaxLine] bytes and, when importing, one table entry per live
// object, never the trace (a Go execution trace: x/exp/trace's one
// generation at a time, about a second of the program, bounded by
// [ReaderOptions].MaxGoGeneration, and one entry per live object and per
// span). gzip and zstd streams are decompressed
// transparently (recognized by their magic bytes, not their names), and
// with [Auto] the format is detected from the first lines. [Open] does the
// same for a file. [Reader.Next] returns one event at a time;
// [Reader.Read] fills a batch, faster. A line that breaks its format
// stops the Reader with an [Error] naming the file, the line, what the
// line was taken for and the syntax expected:
//
//	systemui.txt:1234: malloc: want "<tid>: malloc <ptr> <size> [<start ns> <end ns>]", got "202: malloc 0xb4827400"
//
// # From addresses to objects
//
// Recordings name blocks by address; an importer maps each live address
// to the ID of the object there. An address names its object from the
// allocation that returned it to the free that gives it back; then it may
// name another. realloc(p, n) = q keeps p's ID and moves it to q. C's
// corner cases keep C's meaning (glibc's, where libcs differ):
//
//   - realloc(NULL, n) is an Alloc; realloc(p, 0) returning NULL is a
//     Free (a realloc(p, 0) that returns a block is a Realloc to 0 bytes);
//   - free(NULL) is dropped (counted in [ReaderStats].NullFrees);
//   - an allocation or realloc that returned NULL is dropped (Failed): the
//     program got no memory, and a failed realloc left its block as it was;
//   - a non-power-of-two alignment is rounded up to a power of two, as
//     glibc's memalign does.
//
// Recordings are not always whole: tracing may start after the program
// did, and recorders miss calls. What the importers make of that, and
// count in [ReaderStats]:
//
//   - a free of an address that is not live (allocated before recording
//     began, or freed twice) becomes a Free of a fresh ID that was never
//     allocated, so that the replayer meets it as a free of an unknown
//     object, counts it, and goes on (UnknownFrees);
//   - a realloc of an address that is not live becomes an Alloc of a
//     fresh ID with the new size: the block exists from then on, only its
//     old size is unknown (UnknownReallocs);
//   - an allocation that returns an address still live means the free of
//     the block there was missed: the importer emits that Free first, then
//     the allocation (MissedFrees).
//
// So an imported trace is always consistent: every Alloc, Calloc and
// Memalign names a fresh ID, every Realloc a live one, and every Free a
// live one or one never seen before.
//
// # Formats
//
// Each format, the lines it is read from, and what it does not record.
//
// Native (carve's own text; [Writer] writes it, so any trace can be
// converted; docs/native-format.md describes it too). The first line is
// the header; then one event a line, fields separated by blanks, numbers
// in decimal:
//
//	# carve trace v1
//	a <id> <size> [<align>]    Alloc (align: a power of two up to 2^31)
//	c <id> <n> <size>          Calloc of n elements of size bytes each
//	m <id> <align> <size>      Memalign
//	r <id> <size>              Realloc
//	f <id>                     Free
//	t <thread>                 the thread of the events that follow (0 at first)
//	# <comment>                and blank lines: ignored
//
// Version 2 ("# carve trace v2") is version 1 with labels, and with the
// samples of the Go heap's own metrics ([GoHeapSample]):
//
//	l <label> <name> [<key>=<value> ...]   defines label number <label>, once
//	a <id> <size> [<align>] [@<label>]     an Alloc of an object with that label
//	c <id> <n> <size> [@<label>]           a Calloc, labelled
//	m <id> <align> <size> [@<label>]       a Memalign, labelled
//	r <id> <size> [@<label>]               a Realloc, which gives the object that label
//	g <objects bytes> <goal bytes>         the Go heap here: its objects and goal
//
// A label is defined before the first event that uses it; its number is
// the trace's own name for it (1 to [MaxLabels]; the Reader numbers labels
// 1, 2, 3... in the order they are defined, and holds at most 32 MiB of
// them, [MaxLabelBytes]). A name or a value is a word
// without blanks, or a Go string literal in double quotes when it holds
// blanks, quotes, backslashes or bytes that are not printable UTF-8 (Go
// type names do: "struct { F uintptr; X0 *main.conn }"); a key is
// letters, digits and "_.-". The Writer writes version 1 unless it is
// given a label table ([Writer.SetLabels]), and then defines each label
// just before its first use, so a trace without labels converts to the
// same bytes as before version 2. Version 1 files read as they always
// did.
//
// Version 3 ("# carve trace v3") is version 2 with the Go program's
// collections ([GoCycle], [Reader.GoCycles]):
//
//	G <mark start> <mark end> <marked bytes> <goal bytes>
//
// a collection whose mark began after <mark start> events of the trace and
// ended after <mark end> (ends in order, none past the events before the
// line), the bytes it found reachable, and the heap goal it set (0: not
// reported). It is written where the collection's goal became known, just
// after the mark's end. The Writer writes version 3 when it is given a
// label table. A trace of version 2 or 1 has no collections: its frees
// stay where the sweep made them (see [MoveFrees]).
//
// Version 3 also carries samples of the recorded program's RSS
// ([ProcessRSS], [Reader.ProcessRSS]):
//
//	R <events before>|- <VmRSS bytes> <VmHWM bytes> test|program|valgrind
//
// VmRSS and VmHWM of the process named by the last word (the test binary
// of a go test run; the program itself, a C recorder's buffers included;
// valgrind's process), placed after <events before> events (in order,
// none past the events before the line), or "-": not placed, a peak only.
//
// It keeps everything an Event holds. (A binary format was left out: the
// native text parses in about twice the time it takes to split it into
// lines, some 35 ns an event, and gzip brings it to about 3 bytes an
// event; the systemui trace is 8.4 MB as native text, 2.2 MB gzipped.)
//
// Rep, the CS:APP malloc lab's traces (.rep), as its driver mdriver reads
// them: four numbers (suggested heap size, number of ids, number of ops,
// weight; read, see [Reader.RepHeader], not checked), then
//
//	a <id> <size>
//	r <id> <size>
//	f <id>
//
// Its ids name blocks as a program's pointers do, so they go through the
// address mapping: objects are numbered anew, and "r" on an id without a
// block is an allocation (realloc(NULL) in mdriver). It has no calloc,
// no alignment and no threads.
//
// Valgrind, the log of valgrind --trace-malloc=yes: lines
// "--<pid>-- malloc(16) = 0x4A40040", "--<pid>-- free(0x4A40040)",
// "calloc(<n>,<size>) = <ptr>", "realloc(<ptr>,<size>) = <ptr>",
// "memalign(al <align>, size <size>) = <ptr>", operator new and delete by
// their mangled names (_Znwm, _ZdlPv...), aligned new as
// "<name>(size <size>, al <align>) = <ptr>". Everything else in the log is
// skipped, and so are the quirks of particular versions; see valgrind.go.
// It keeps calloc, alignment and realloc, but not threads, and valgrind
// 3.20 and later print no result for posix_memalign and aligned_alloc
// ([ReaderStats].Invisible). Darwin's malloc_zone_* calls are skipped.
//
// Heaptrack, heaptrack's data: raw (heaptrack -r: "+ <size> <trace>
// <ptr>", "- <ptr>", hexadecimal) or interpreted (heaptrack's default
// output: "a <size> <trace>" defines allocation info 0, 1, 2...; "+ <info>"
// and "- <info>" allocate and free one of them). Both are usually zstd
// compressed, which is why this package reads zstd. heaptrack turns a
// realloc into a free and an allocation, records calloc and memalign as
// plain allocations without their alignment, and does not record
// realloc(p, 0); interpreted data also lose which object a free frees
// (the Reader frees the newest live object of the same size and stack).
// Each allocation's call stack is kept as its site, a label of no type
// (see stack.go): raw data's instruction pointers named by
// [ReaderOptions].Symbolizer through its module records ("m"),
// interpreted data's by the function, file and line heaptrack wrote
// ("i", whose first frame is the innermost, inlined ones included).
// See heaptrack.go.
//
// Mtrace, the log of glibc's mtrace(): "@ <caller> + <ptr> <size>",
// "@ <caller> - <ptr>", and a realloc as "< <old>" then "> <new> <size>"
// on the next line (see mtrace.go). glibc logs calloc and memalign as
// allocations, so calloc and alignments are lost, and threads. Since glibc
// 2.34 mtrace() records nothing unless libc_malloc_debug.so is preloaded.
//
// AOSP, Android's allocation records (malloc_debug's record_allocs, which
// memory_replay replays): "<tid>: malloc <ptr> <size>", "calloc <ptr>
// <nmemb> <size>", "memalign <ptr> <alignment> <size>", "realloc <new>
// <old> <size>", "free <ptr>", "thread_done 0x0", with optional start and
// end times, which are dropped. It keeps everything, threads included.
// carve's recorder adds its call stacks: "module <bias> <lo> <hi>
// <path>" and "stack <id> <return address>..." lines (hexadecimal,
// innermost first), and " @<id>" at the end of an allocation's record;
// each allocation gets its stack's site as heaptrack's do.
//
// Go, an execution trace of a Go program (runtime/trace, go test -trace,
// /debug/pprof/trace) recorded with GODEBUG=traceallocfree=1, the
// runtime's experiment that writes the heap's spans and objects, read
// with golang.org/x/exp/trace (see gotrace.go for the events). What it
// holds: every heap object's allocation and its sweep, with its type
// (name, size, pointer bytes: the object's label) and the span that
// holds it; the objects alive when the trace started, which become
// allocations at the start of the stream, before the program's own
// ([ReaderStats].GoAtStart); goroutine stacks ([ReaderOptions].GoStacks
// keeps them, labelled "goroutine stack"; they are left out otherwise);
// the runtime's own heap metrics, /memory/classes/heap/objects:bytes and
// /gc/heap/goal:bytes, kept as a side series keyed by the number of
// events before each sample ([Reader.GoHeap]). What it loses:
//
//   - call stacks: allocation events carry none;
//   - the moment an object dies: a free comes when the sweeper finds the
//     object dead, after the GC cycle that marked the heap, not when the
//     program dropped it, so lifetimes are as long as the GC held them;
//   - the requested size: an object's size is the size of its slot, its
//     span's size class in Go's own table for the release that wrote the
//     trace (generated from the toolchain's source by mkgoclasses.go), or
//     the span's pages for a large object (a []byte's objects carry the
//     element type uint8, of size 1, so the type cannot size them). A
//     trace of a release whose table carve does not have is refused, and
//     so is one whose spans do not fit the table;
//   - the tiny objects: the runtime packs pointer-free objects under 16
//     bytes into shared 16-byte blocks; the block is one object, of 16
//     bytes and of the type of the first object put in it, and the
//     others packed into it are counted ([ReaderStats].TinyPacked), not
//     returned;
//   - the types of the pointer-free objects alive when the trace started
//     (the runtime keeps no type for them): those carry no label, nor do
//     the objects allocated without a type (a string's bytes, say);
//   - threads: events carry thread 0.
//
// The events of a trace are in the order of their timestamps, and the
// sweeper stamps an object's free after it has made the slot free: on
// another P an allocation into that slot can come first. The importer
// then frees the old object at the allocation (MissedFrees) and the free
// that comes after frees nothing ([ReaderStats].LateFrees); a span freed
// with objects still live in the trace is treated the same way.
//
// The trace's peak live bytes come close to the peak of its own
// /memory/classes/heap/objects:bytes (within a few percent for the connection
// workload of package record's tests), which counts the same slots.
// Auto detection knows a Go execution trace by its header, "go 1.<n>
// trace" and three zero bytes; for the text formats it goes by the first
// line that looks like a format's: "# carve trace" is native; a line of numbers only, .rep; "<digits>: ",
// AOSP; "= Start" or "@ ", mtrace; "==<pid>==" or "--<pid>-- ", valgrind;
// a letter and a blank ("v 10400 3", "+ 10 8 5627750451d0"), heaptrack.
// Lines that look like none are passed over, up to 64 of them: a valgrind
// log may follow the program's own output. A line only a native trace has
// ("l 1 main.T", "f 1", "r 1 32", "a 1 16 @1"), first or after heaptrack's
// "a", "c", "m" and "t" records that a native trace's events resemble,
// makes the trace native: a native trace that lost its header, which its
// reader refuses as such.
//
// # Generators and summaries
//
// Two packages build on this one: package gen (lab/trace/gen) writes the
// synthetic traces carve gen runs, to any [EventWriter]; package summary
// (lab/trace/summary) reads a trace and describes it as a whole, by label
// too. Neither is imported here: the model and the formats do not depend
// on what is made of them.
//
// # Dependencies
//
// zstd comes from github.com/klauspost/compress/zstd: the standard library
// has no zstd, heaptrack compresses with it by default, and that package
// is the maintained, widely used pure-Go implementation (no cgo, so the
// lab builds everywhere). The decoder is bounded to a 128 MiB window.
//
// Go execution traces are read with golang.org/x/exp/trace, pinned in
// go.mod: the format is the Go team's, versioned with each release and
// undocumented outside the toolchain's source; the standard library's
// reader (internal/trace) cannot be imported, and x/exp/trace is the same
// code published by the Go team for tools outside the toolchain. It
// orders the events of all threads, validates them, and hands over the
// alloc/free experiment's events and batches raw. Its panics on a
// malformed trace become errors ([ErrGoTrace]).
package trace
