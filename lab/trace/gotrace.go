package trace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/metrics"
	"slices"

	xtrace "golang.org/x/exp/trace"
)

// The Go importer reads a Go execution trace recorded with
// GODEBUG=traceallocfree=1 (the runtime's alloc/free experiment; see the
// package documentation for what it holds and loses) through
// golang.org/x/exp/trace, the Go team's reader of the format, which
// orders the events of all threads and exposes the experiment's events
// raw. What the runtime writes (runtime/traceallocfree.go):
//
//	Span, SpanAlloc    [id npages kindclass]  a span exists / is allocated
//	SpanFree           [id]                   a span is freed
//	HeapObject         [id type]              an object alive when the trace started
//	HeapObjectAlloc    [id type]              an object is allocated
//	HeapObjectFree     [id]                   an object is swept
//	GoroutineStack, GoroutineStackAlloc [id order], GoroutineStackFree [id]
//
// A span's id is its first page's index from the heap's lowest address,
// an object's its offset from there in units of the heap's minimum
// alignment, a stack's in units of the smallest stack. The heap's lowest
// address, its page size, that alignment and the smallest stack come in
// an experimental batch of kind 1 of the first generation; the types
// (id, address, size, pointer bytes, name), in batches of kind 0 of each
// generation, their IDs good for that generation only. x/exp/trace hands
// both over with the generation's Sync event, before its other events.

// The metrics the Go importer keeps (see GoHeapSample).
const (
	goObjectsMetric = "/memory/classes/heap/objects:bytes"
	goGoalMetric    = "/gc/heap/goal:bytes"
)

// ErrGoTrace is wrapped by the errors of a Go execution trace that
// x/exp/trace cannot read or whose heap events do not fit the heap's
// rules (a span of a class the release does not have, say).
var ErrGoTrace = errors.New("trace: bad Go execution trace")

// ErrNoGoHeap is wrapped by the error of a Go execution trace recorded
// without the alloc/free experiment: it has no heap events.
var ErrNoGoHeap = errors.New("trace: the Go execution trace has no heap events (record it with GODEBUG=traceallocfree=1)")

// goHeader returns the format of a Go execution trace from its first
// bytes, "go 1.<format> trace\x00\x00\x00".
func goHeader(b []byte) (format int, ok bool) {
	const prefix, suffix = "go 1.", " trace\x00\x00\x00"
	if !bytes.HasPrefix(b, []byte(prefix)) {
		return 0, false
	}
	i := len(prefix)
	for ; i < len(b) && i < len(prefix)+3 && '0' <= b[i] && b[i] <= '9'; i++ {
		format = format*10 + int(b[i]-'0')
	}
	if i == len(prefix) || !bytes.HasPrefix(b[i:], []byte(suffix)) {
		return 0, false
	}
	return format, true
}

// goState is the Go importer's state: the spans and objects alive, the
// generation's types, the events due, the metric samples.
type goState struct {
	tr      *xtrace.Reader
	bound   *GoBound // in front of tr
	classes *goClasses
	stacks  bool // ReaderOptions.GoStacks
	sites   func(size, id uint64) (string, bool)
	// siteLabels are the labels of (type, site) pairs, by type ID and
	// site: a type's own label (goType.label) is its objects' of no site.
	siteLabels map[goSite]uint32

	// The heap's layout, from the info batch (info: it came).
	info                                  bool
	minAddr, pageSize, minAlign, fixStack uint64
	maxPages                              uint64 // the longest small span

	types   map[uint64]goType // this generation's types, by ID
	spans   map[uint64]*goSpan
	objects addrMap // 1 + object id -> carve ID
	// late counts, by 1 + object id, the frees the importer made itself
	// (an allocation into the object's slot, or its span's free, came
	// first) whose HeapObjectFree may still come: the runtime's sweeper
	// stamps its frees after it has made the slots free, so another P's
	// allocation into a slot can come before the free of the slot's
	// last object in the trace's order.
	late    map[uint64]int32
	stackID addrMap // 1 + stack id -> carve ID
	stackL  uint32  // the label of goroutine stacks

	queue []Event // the events of the last trace event, due
	qi    int     // queue[qi:] are not returned yet
	made  int64   // the events queued so far: the stream's position
	// quietMade and quietFrom are made and bound.total at the first Sync
	// after the last event queued (collectQuiet).
	quietMade, quietFrom int64
	syncs                int
	read                 int64 // events of the execution trace read

	cur   GoHeapSample // the metrics last reported
	mark  goMark       // the collection being read
	clock goClock      // the program's RSS, to place (ReaderOptions.ProcessRSS)
}

// goType is one type of a generation's table.
type goType struct {
	name           string
	size, ptrBytes uint64
	label          uint32 // 0 until an object of the type is returned
}

// goSpan is a span of the heap.
type goSpan struct {
	npages uint64
	elem   uint64 // the size of its objects
	tiny   bool   // its class is that of the tiny blocks, pointer-free
	live   int64  // its objects alive in the trace
}

// maxTypeName is the longest type name kept whole: longer ones (some
// anonymous structs) are cut, with "..." after.
const maxTypeName = 4096

// goImporter reads a Go execution trace: a binary stream the Reader does
// not split into lines, read through next. Its state is the Reader's
// goState (gotr), which the accessors of a Go program's trace read
// (GoCycles, ProcessRSS, Position).
type goImporter struct{}

func openGo(r *Reader, opt ReaderOptions) (importer, error) {
	r.lines.fillAll()
	if err := r.initGo(opt); err != nil {
		return nil, err
	}
	return goImporter{}, nil
}

// isGoHeader reports whether b starts with a Go execution trace's header.
func isGoHeader(b []byte) bool {
	_, ok := goHeader(b)
	return ok
}

func (goImporter) next(r *Reader, ev *Event) bool { return r.nextGo(ev) }

// line is never called: the Reader reads a stream importer through next.
func (goImporter) line(r *Reader, _ []byte, _ bool, _ *Event) (bool, error) {
	return false, fmt.Errorf("%s: %w: a Go execution trace has no lines", r.name, ErrGoTrace)
}

func (goImporter) end(*Reader) (bool, error) { return false, nil }

// initGo sets r up to read a Go execution trace from rd, which starts
// with the header buffered in r.lines.
func (r *Reader) initGo(opt ReaderOptions) error {
	l := r.lines
	format, ok := goHeader(l.buf[l.r:l.w])
	if !ok {
		return fmt.Errorf("%s: %w: no header \"go 1.<n> trace\"", r.name, ErrGoTrace)
	}
	classes, err := goClassesFor(format)
	if err != nil {
		return fmt.Errorf("%s: %w", r.name, err)
	}
	head := bytes.Clone(l.buf[l.r:l.w])
	rd := io.MultiReader(bytes.NewReader(head), l.rd)
	l.buf, l.r, l.w = nil, 0, 0 // the Go reader buffers on its own
	bound := NewGoBound(rd, opt.MaxGoGeneration)
	tr, err := xtrace.NewReader(bound)
	if bound.err != nil {
		return fmt.Errorf("%s: %w", r.name, bound.err) // with the first bytes read
	}
	if err != nil {
		return fmt.Errorf("%s: %w: %w", r.name, ErrGoTrace, err)
	}
	r.gotr = &goState{
		tr:       tr,
		bound:    bound,
		classes:  classes,
		stacks:   opt.GoStacks,
		sites:    opt.Sites,
		maxPages: classes.maxSmallPages(),
		types:    make(map[uint64]goType),
		spans:    make(map[uint64]*goSpan),
		clock:    goClock{due: slices.Clone(opt.ProcessRSS), of: opt.ProcessRSSOf},
	}
	r.labels = &Labels{}
	return nil
}

// nextGo stores the next event of a Go trace in ev; at the end, or on an
// error, it returns false and leaves the reason in r.err.
func (r *Reader) nextGo(ev *Event) bool {
	g := r.gotr
	for g.qi == len(g.queue) {
		g.queue, g.qi = g.queue[:0], 0
		if err := r.goStep(); err != nil {
			r.err = err
			return false
		}
	}
	*ev = g.queue[g.qi]
	g.qi++
	return true
}

// goStep reads one event of the execution trace and queues the events it
// makes, if any. A panic of x/exp/trace on a malformed trace becomes an
// error.
func (r *Reader) goStep() (err error) {
	g := r.gotr
	defer func() {
		if p := recover(); p != nil {
			err = r.goError(fmt.Errorf("x/exp/trace failed: %v", p))
		}
	}()
	e, err := g.tr.ReadEvent()
	if g.bound.err != nil {
		// x/exp/trace may have wrapped it, or not.
		return fmt.Errorf("%s: %w", r.name, g.bound.err)
	}
	switch {
	case err == io.EOF && !g.info && g.read > 0:
		return fmt.Errorf("%s: %w", r.name, ErrNoGoHeap)
	case err == io.EOF:
		if err := r.goCycleDone(); err != nil {
			return err
		}
		if err := r.goEndRSS(); err != nil {
			return err
		}
		return io.EOF
	case err != nil:
		return r.goError(err)
	}
	g.read++
	if !g.info && e.Kind() != xtrace.EventSync {
		// The heap's layout comes with the first generation's Sync, the
		// first event, when the experiment is on.
		return fmt.Errorf("%s: %w", r.name, ErrNoGoHeap)
	}
	if e.Kind() == xtrace.EventSync {
		if s := e.Sync(); s.ClockSnapshot != nil {
			c := &g.clock
			c.ok, c.atSnapshot = true, false
			c.trace, c.mono, c.wall = int64(s.ClockSnapshot.Trace), s.ClockSnapshot.Mono, s.ClockSnapshot.Wall
		}
	}
	if err := r.goPlaceRSS(int64(e.Time())); err != nil {
		return err
	}
	switch e.Kind() {
	case xtrace.EventSync:
		g.collectQuiet()
		return r.goSync(e.Sync())
	case xtrace.EventMetric:
		return r.goMetric(e.Metric())
	case xtrace.EventRangeBegin, xtrace.EventRangeActive, xtrace.EventRangeEnd:
		return r.goRange(e.Kind(), e.Range().Name)
	case xtrace.EventExperimental:
		return r.goExperimental(e.Experimental())
	}
	return nil
}

// goError wraps an error of the Go trace with the file's name and where
// it was read.
func (r *Reader) goError(err error) error {
	return fmt.Errorf("%s: event %d of the execution trace: %w: %w", r.name, r.gotr.read, ErrGoTrace, err)
}

// emit queues e.
func (g *goState) emit(e Event) {
	g.queue = append(g.queue, e)
	g.made++
}

// collectQuiet runs a collection when generations that gave no event
// have cost more than the bound since the last event and the process's
// collector is off. The go row's replayer turns it off and collects after
// the events that bring its heap to the goal (replay.NewGoHeap): a
// Reader's Next that reads generation after generation without an event
// would leave every one of them to the heap, uncollected (20 generations
// of 128 MiB of empty batches, a 7.6 KB zstd file, took the go row's
// process to 4.4 GB). A real trace has events in its generations: this
// runs once per bound read without any.
func (g *goState) collectQuiet() {
	if g.made != g.quietMade {
		g.quietMade, g.quietFrom = g.made, g.bound.total
		return
	}
	if g.bound.total-g.quietFrom <= g.bound.max {
		return
	}
	g.quietFrom = g.bound.total
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 && int64(s[0].Value.Uint64()) < 0 {
		runtime.GC()
	}
}

// goSync starts a generation: its types replace the last one's, and the
// first generation gives the heap's layout.
func (r *Reader) goSync(s xtrace.Sync) error {
	g := r.gotr
	g.syncs++
	clear(g.types)
	clear(g.siteLabels) // by this generation's type IDs too
	for _, b := range s.ExperimentalBatches["AllocFree"] {
		if len(b.Data) == 0 {
			continue
		}
		var err error
		switch b.Data[0] {
		case 0:
			err = g.readTypes(b.Data[1:])
		case 1:
			err = g.readInfo(b.Data[1:])
		default:
			err = fmt.Errorf("an alloc/free batch of kind %d (want 0, types, or 1, the heap's layout)", b.Data[0])
		}
		if err != nil {
			return r.goError(err)
		}
	}
	return nil
}

// readTypes reads a batch of types: id, address, size, pointer bytes,
// name length and name, each number a uvarint.
func (g *goState) readTypes(d []byte) error {
	for len(d) > 0 {
		var v [5]uint64
		for i := range v {
			n, k := binary.Uvarint(d)
			if k <= 0 {
				return fmt.Errorf("a type batch cut short")
			}
			v[i], d = n, d[k:]
		}
		if v[4] > uint64(len(d)) {
			return fmt.Errorf("a type name of %d bytes in a batch of %d", v[4], len(d))
		}
		name := d[:v[4]]
		d = d[v[4]:]
		if len(name) > maxTypeName {
			name = append(name[:maxTypeName:maxTypeName], "..."...)
		}
		g.types[v[0]] = goType{name: string(name), size: v[2], ptrBytes: v[3]}
		if len(g.types) > MaxLabels {
			return fmt.Errorf("%w (more than %d types)", ErrTooManyLabels, MaxLabels)
		}
	}
	return nil
}

// readInfo reads the heap's layout: its lowest address, its page size,
// its minimum alignment and the size of the smallest stack, uvarints. The
// page size and alignment must be the release's.
func (g *goState) readInfo(d []byte) error {
	var v [4]uint64
	for i := range v {
		n, k := binary.Uvarint(d)
		if k <= 0 {
			return fmt.Errorf("a heap info batch cut short")
		}
		v[i], d = n, d[k:]
	}
	c := g.classes
	if v[1] != c.pageSize || v[2] != c.minAlign {
		return fmt.Errorf("a heap of %d B pages and %d B alignment, where %s's are %d and %d",
			v[1], v[2], c.release, c.pageSize, c.minAlign)
	}
	if v[3] == 0 || v[3]&(v[3]-1) != 0 {
		return fmt.Errorf("a smallest stack of %d B", v[3])
	}
	g.info = true
	g.minAddr, g.pageSize, g.minAlign, g.fixStack = v[0], v[1], v[2], v[3]
	return nil
}

// goMetric keeps a sample of the heap's metrics, and notes it for the
// collection being read.
func (r *Reader) goMetric(m xtrace.Metric) error {
	g := r.gotr
	if m.Value.Kind() != xtrace.ValueUint64 {
		return nil
	}
	switch m.Name {
	case goObjectsMetric:
		g.cur.Objects = m.Value.Uint64()
	case goGoalMetric:
		g.cur.Goal = m.Value.Uint64()
	default:
		return nil
	}
	g.cur.Events = g.made
	r.goHeap.add(g.cur)
	return r.goMarkMetric(m.Name, m.Value.Uint64())
}

// goArgs is the number of arguments of each event of the experiment.
var goArgs = map[string]int{
	"Span": 3, "SpanAlloc": 3, "SpanFree": 1, "HeapObject": 2, "HeapObjectAlloc": 2, "HeapObjectFree": 1,
	"GoroutineStack": 2, "GoroutineStackAlloc": 2, "GoroutineStackFree": 1,
}

// goExperimental handles an event of the alloc/free experiment.
func (r *Reader) goExperimental(x xtrace.ExperimentalEvent) error {
	g := r.gotr
	if x.Experiment != "AllocFree" {
		return nil
	}
	if !g.info {
		return r.goError(fmt.Errorf("a %s event before the heap's layout", x.Name))
	}
	var a [3]uint64
	if len(x.Args) > len(a) {
		return r.goError(fmt.Errorf("a %s event of %d arguments", x.Name, len(x.Args)))
	}
	for i := range x.Args {
		v := x.ArgValue(i)
		if v.Kind() != xtrace.ValueUint64 {
			return r.goError(fmt.Errorf("a %s event whose %s is not a number", x.Name, x.Args[i]))
		}
		a[i] = v.Uint64()
	}
	if len(x.Args) != goArgs[x.Name] {
		return r.goError(fmt.Errorf("a %s event of %d arguments", x.Name, len(x.Args)))
	}
	var err error
	switch x.Name {
	case "Span", "SpanAlloc":
		err = r.goSpan(a[0], a[1], goSpanKind(a[2]))
	case "SpanFree":
		r.goSpanFree(a[0])
	case "HeapObject":
		r.stats.GoAtStart++
		err = r.goAlloc(a[0], a[1])
	case "HeapObjectAlloc":
		err = r.goAlloc(a[0], a[1])
	case "HeapObjectFree":
		r.goFree(a[0])
	case "GoroutineStack", "GoroutineStackAlloc":
		r.stats.GoStacks++
		if g.stacks {
			err = r.goStackAlloc(a[0], a[1])
		}
	case "GoroutineStackFree":
		if g.stacks {
			r.goStackFree(a[0])
		}
	}
	if err != nil {
		return r.goError(err)
	}
	return nil
}

// goSpan records that span id exists, of npages pages and kind k. A span
// that replaces one with objects still live means their frees were
// missed: they are freed first.
func (r *Reader) goSpan(id, npages uint64, k goSpanKind) error {
	g := r.gotr
	if old, ok := g.spans[id]; ok {
		r.goFreeSpan(id, old)
	}
	if !k.heap() {
		return nil
	}
	elem, err := g.classes.elemSize(k, npages)
	if err != nil {
		return err
	}
	g.spans[id] = &goSpan{npages: npages, elem: elem, tiny: k.class() == uint64(g.classes.tinyClass) && k.noscan()}
	if len(g.spans) > MaxLive {
		return fmt.Errorf("%w (more than %d spans)", ErrTooManyLive, MaxLive)
	}
	return nil
}

// goSpanFree records that span id is freed.
func (r *Reader) goSpanFree(id uint64) {
	if sp, ok := r.gotr.spans[id]; ok {
		r.goFreeSpan(id, sp)
	}
}

// goFreeSpan forgets span id, whose objects must all be freed: the frees
// of those still live were missed, and are made here.
func (r *Reader) goFreeSpan(id uint64, sp *goSpan) {
	g := r.gotr
	delete(g.spans, id)
	if sp.live <= 0 {
		return
	}
	base := id * g.pageSize
	for off := uint64(0); off+sp.elem <= sp.npages*g.pageSize; off += sp.elem {
		if cid, ok := g.objects.del(1 + (base+off)/g.minAlign); ok {
			r.stats.MissedFrees++
			g.expectLate(1 + (base+off)/g.minAlign)
			g.emit(Event{Op: Free, ID: cid})
		}
	}
}

// spanOf returns the span that holds object id, and the span's id. Small
// spans are at most maxPages long, and a large object starts its span, so
// the span is found at the object's page or a few before it.
func (g *goState) spanOf(id uint64) (*goSpan, uint64, bool) {
	page := id * g.minAlign / g.pageSize
	for k := uint64(0); k < max(g.maxPages, 1) && k <= page; k++ {
		if sp, ok := g.spans[page-k]; ok {
			return sp, page - k, page-k+sp.npages > page
		}
	}
	return nil, 0, false
}

// goAlloc records the allocation of object id, of the generation's type
// typ (0: none known). Its size is that of its span's objects; its key,
// the start of its slot in the span. An allocation into a tiny block
// already live is not an object of its own (TinyPacked); one into any
// other slot still live means the free of the object there was missed.
func (r *Reader) goAlloc(id, typ uint64) error {
	g := r.gotr
	key, size := id, g.minAlign
	sp, base, ok := g.spanOf(id)
	if ok {
		size = sp.elem
		start := base * g.pageSize
		key = (start + (id*g.minAlign-start)/size*size) / g.minAlign
	} else {
		r.stats.GoNoSpan++
		if t, ok := g.types[typ]; ok && t.size > 0 && t.size < 1<<40 {
			size = t.size
		}
	}
	site, byShare := "", false
	if g.sites != nil {
		if site, byShare = g.sites(size, r.nextID); site != "" {
			r.stats.GoSiteBytes += size
			if byShare {
				r.stats.GoShareBytes += size
			}
		}
	}
	r.stats.GoBytes += size
	label, err := r.goLabel(typ, site, byShare)
	if err != nil {
		return err
	}
	if old, live := g.objects.get(1 + key); live {
		if ok && (sp.tiny || key != id) {
			r.stats.TinyPacked++
			return nil
		}
		r.stats.MissedFrees++
		g.objects.del(1 + key)
		g.expectLate(1 + key)
		g.emit(Event{Op: Free, ID: old})
		if ok {
			sp.live--
		}
	}
	cid := r.nextID
	r.nextID++
	g.objects.put(1+key, cid)
	if g.objects.len() > MaxLive {
		return fmt.Errorf("%w (more than %d)", ErrTooManyLive, MaxLive)
	}
	if ok {
		sp.live++
	}
	g.emit(Event{Op: Alloc, ID: cid, Size: size, Label: label})
	return nil
}

// expectLate notes that the importer freed the object at key itself, and
// that the runtime's own free of it may come later (goState.late).
func (g *goState) expectLate(key uint64) {
	if g.late == nil || len(g.late) >= MaxLive {
		g.late = map[uint64]int32{} // bounded: the oldest expectations go first
	}
	g.late[key]++
}

// goFree records that object id was swept. The free of an object the
// importer already freed itself (goState.late) is that free, come late:
// it frees nothing, and the object now in the slot stays live.
func (r *Reader) goFree(id uint64) {
	g := r.gotr
	if n := g.late[1+id]; n > 0 {
		if n == 1 {
			delete(g.late, 1+id)
		} else {
			g.late[1+id] = n - 1
		}
		r.stats.LateFrees++
		return
	}
	cid, ok := g.objects.del(1 + id)
	if !ok {
		r.stats.UnknownFrees++
		cid = r.nextID
		r.nextID++
	} else if sp, _, ok := g.spanOf(id); ok {
		sp.live--
	}
	g.emit(Event{Op: Free, ID: cid})
}

// goSite is a type of the generation and a site its objects come from.
type goSite struct {
	typ     uint64
	site    string
	byShare bool
}

// goLabel returns the label of the generation's type typ allocated at
// site ("": none known; byShare: drawn by share), interning it at its
// first object; 0 for no type.
func (r *Reader) goLabel(typ uint64, site string, byShare bool) (uint32, error) {
	if typ == 0 {
		return 0, nil
	}
	g := r.gotr
	t, ok := g.types[typ]
	if !ok {
		r.stats.UnknownTypes++
		return 0, nil
	}
	if site == "" && t.label != 0 {
		return t.label, nil
	}
	if l, ok := g.siteLabels[goSite{typ, site, byShare}]; ok && site != "" {
		return l, nil
	}
	attrs := []Attr{
		{AttrPtrBytes, fmt.Sprint(t.ptrBytes)},
	}
	if site != "" {
		attrs = append(attrs, Attr{AttrSite, site})
	}
	if byShare {
		attrs = append(attrs, Attr{AttrSiteByShare, "1"})
	}
	attrs = append(attrs, Attr{AttrSize, fmt.Sprint(t.size)})
	l, err := r.labels.Intern(Label{Name: t.name, Attrs: attrs})
	if err != nil {
		return 0, err
	}
	if site != "" {
		if g.siteLabels == nil {
			g.siteLabels = map[goSite]uint32{}
		}
		g.siteLabels[goSite{typ, site, byShare}] = l
		return l, nil
	}
	t.label = l
	g.types[typ] = t
	return l, nil
}

// goStackLabel is the label of goroutine stacks (ReaderOptions.GoStacks).
const goStackLabel = "goroutine stack"

// goStackAlloc records a goroutine stack of 2^(order-1) bytes.
func (r *Reader) goStackAlloc(id, order uint64) error {
	g := r.gotr
	if order == 0 || order > 41 {
		return fmt.Errorf("a goroutine stack of order %d", order)
	}
	if g.stackL == 0 {
		l, err := r.labels.Intern(Label{Name: goStackLabel})
		if err != nil {
			return err
		}
		g.stackL = l
	}
	if old, live := g.stackID.del(1 + id); live {
		r.stats.MissedFrees++
		g.emit(Event{Op: Free, ID: old})
	}
	cid := r.nextID
	r.nextID++
	g.stackID.put(1+id, cid)
	if g.stackID.len() > MaxLive {
		return fmt.Errorf("%w (more than %d goroutine stacks)", ErrTooManyLive, MaxLive)
	}
	g.emit(Event{Op: Alloc, ID: cid, Size: 1 << (order - 1), Label: g.stackL})
	return nil
}

// goStackFree records that a goroutine stack was freed.
func (r *Reader) goStackFree(id uint64) {
	g := r.gotr
	cid, ok := g.stackID.del(1 + id)
	if !ok {
		r.stats.UnknownFrees++
		cid = r.nextID
		r.nextID++
	}
	g.emit(Event{Op: Free, ID: cid})
}

// GoRelease returns the Go release whose size classes size the objects
// of a Go execution trace ("go1.26"), or "" for other formats.
func (r *Reader) GoRelease() string {
	if r.gotr == nil {
		return ""
	}
	return r.gotr.classes.release
}
