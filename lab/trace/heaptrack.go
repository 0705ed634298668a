package trace

import "fmt"

// heaptrack's data files, one record a line, a letter and hexadecimal
// fields without 0x. Two kinds exist:
//
// Raw, as libheaptrack writes it (heaptrack -r, then heaptrack.*.raw.zst
// or .raw.gz):
//
//	v <heaptrack version> <file format version>
//	+ <size> <trace index> <ptr>      an allocation
//	- <ptr>                           a free
//
// Interpreted, as heaptrack_interpret rewrites it (heaptrack's default
// output, heaptrack.*.zst or .gz): addresses are gone, each allocation
// names an allocation info, a (size, stack) pair defined once:
//
//	a <size> <trace index>            allocation info 0, 1, 2... in order
//	+ <allocation info index>         an allocation of that size
//	- <allocation info index>         a free of an allocation of that info
//
// The call stacks, kept as each allocation's site (see stack.go): in raw
// data, the modules loaded and the trace nodes, each the return address of
// a frame and the node of its caller (the allocation's node is the
// innermost frame, the allocator's caller), named by
// ReaderOptions.Symbolizer:
//
//	x <length> <executable>
//	m <length> <file> <load address> [<vaddr> <memsz>]...   a module ("x" the executable), "m 1 -" none
//	t <return address> <parent node>                       trace node 1, 2, 3...
//
// and in interpreted data, what heaptrack_interpret named them:
//
//	s <length> <string>                                    string 1, 2, 3...
//	i <ip> <module> [<function> [<file> <line>] [<function> <file> <line>]...]
//	                                                       instruction pointer 1, 2, 3... (its innermost frame first)
//	t <ip index> <parent node>                             trace node 1, 2, 3...
//
// Every other record (X, I, c, R, A, S, # comments) is skipped. The kind
// is told by the records themselves: an "a" record, a "+" with one field,
// or an "s" or "i" record means interpreted.
//
// What heaptrack loses, raw or not: realloc is recorded as a free and an
// allocation (the object gets a new ID even when it stays in place);
// calloc and aligned allocations are recorded as plain allocations,
// without their alignment (heaptrack 1.4.0, tried here, did not record
// memalign at all: the frees of those blocks come out as UnknownFrees);
// realloc(p, 0) is not recorded (its block stays live until its address
// is allocated again: a MissedFree). The interpreted kind also loses
// which object a free frees: only its allocation info is known, so the
// Reader frees the most recent live object of that info (the same size
// and stack, so live bytes are exact; which block in the heap is not).

const (
	htAllocRaw = `"+ <size> <trace> <ptr>" (raw) or "+ <allocation info>" (interpreted)`
	htFree     = `"- <ptr>" (raw) or "- <allocation info>" (interpreted)`
	htInfo     = `"a <size> <trace>"`
)

// The kinds of heaptrack data.
const (
	htUnknown = iota
	htRaw
	htInterpreted
)

type heaptrackState struct {
	kind   uint8
	sizes  []uint64            // interpreted: the size of each allocation info, 8 bytes each
	labels []uint32            // interpreted: the label of each allocation info's site
	live   map[uint64][]uint64 // interpreted: the live objects of the infos that have any, newest last
	nlive  int

	// The call stacks. Raw: the executable's path ("x"), and the return
	// address of each trace node ("t <ip> <parent>", numbered from 1;
	// the modules, "m" records, are in the Reader's cStacks).
	// Interpreted: the strings ("s"), the instruction pointers ("i": each
	// one's site label) and the trace nodes ("t <ip index> <parent>":
	// the index of each one's instruction pointer).
	exe      string
	nodes    []uint64 // by trace node - 1: raw, its return address; interpreted, its ip's index
	strs     []string // interpreted: by string index - 1
	strBytes int
	ips      []uint32 // interpreted: by ip index - 1, its site's label
}

// maxHeaptrackStrings bounds the bytes of an interpreted file's strings
// the importer keeps.
const maxHeaptrackStrings = 64 << 20

// MaxInfos is the most allocation records ("a" lines) the heaptrack
// importer keeps: 8 bytes each, 128 MiB at most. Past it the Reader
// returns an error that says so and matches ErrTooManyLive (errors.Is)
// rather than grow without bound on a file of records alone.
const MaxInfos = 1 << 24

// errTooManyInfos is the error past MaxInfos: a bound on what the
// importer keeps, as ErrTooManyLive is, in words that name the records.
type errTooManyInfos struct{}

func (errTooManyInfos) Error() string        { return "trace: too many allocation records" }
func (errTooManyInfos) Is(target error) bool { return target == ErrTooManyLive }

func openHeaptrack(r *Reader, opt ReaderOptions) (importer, error) {
	r.labels, r.cstacks.sym = &Labels{}, opt.Symbolizer
	return &heaptrackState{}, nil
}

// isHeaptrackLine reports whether l is a record of heaptrack data: a
// letter of its records, a blank, and its fields ("+ <size> <trace>
// <ptr>", not mtrace's "+ 0x55...").
func isHeaptrackLine(l []byte) bool {
	if len(l) < 2 || l[1] != ' ' {
		return false
	}
	switch l[0] {
	case '+', '-':
		return !hasAt(l, 2, "0x") && !hasAt(l, 2, "(nil)")
	case 'v', 'x', 'X', 'I', 'm', 't', 'i', 'a', 's', 'c', 'R', 'A', 'S':
		return true
	}
	return false
}

func (*heaptrackState) end(*Reader) (bool, error) { return false, nil }

// line reads one record of heaptrack data.
func (h *heaptrackState) line(r *Reader, line []byte, cut bool, ev *Event) (bool, error) {
	if len(line) == 0 || len(line) > 1 && line[1] != ' ' && line[1] != '\t' {
		return r.skip()
	}
	r.site = 0
	var err error
	switch line[0] {
	case '+':
		if cut {
			return false, r.longError("alloc", line)
		}
		a, i, ok := hexField(line, 1)
		if !ok {
			return false, r.syntaxError("alloc", htAllocRaw, line)
		}
		if blank(line, i) { // interpreted
			if h.kind == htRaw {
				return false, r.syntaxError("alloc", `"+ <size> <trace> <ptr>", as the "+" records before`, line)
			}
			h.kind = htInterpreted
			return h.htAlloc(r, a, line, ev)
		}
		var node, p uint64
		node, i, ok = hexField(line, i)
		if ok {
			p, i, ok = hexField(line, i)
		}
		if !ok || !blank(line, i) {
			return false, r.syntaxError("alloc", htAllocRaw, line)
		}
		if h.kind == htInterpreted {
			return false, r.syntaxError("alloc", `"+ <allocation info>", as the records before`, line)
		}
		h.kind = htRaw
		if r.site, err = h.htRawLabel(r, node); err != nil {
			return false, err
		}
		return r.born(p, ev, Event{Op: Alloc, Size: a})
	case '-':
		if cut {
			return false, r.longError("free", line)
		}
		a, i, ok := hexField(line, 1)
		if !ok || !blank(line, i) {
			return false, r.syntaxError("free", htFree, line)
		}
		if h.kind == htInterpreted {
			return h.htFree(r, a, line, ev)
		}
		if a == 0 {
			r.stats.NullFrees++
			return false, nil
		}
		r.free(a, ev)
		return true, nil
	case 'a':
		size, i, ok := hexField(line, 1)
		var node uint64
		if ok {
			node, i, ok = hexField(line, i)
		}
		if cut {
			return false, r.longError("allocation info", line)
		}
		if !ok || !blank(line, i) {
			return false, r.syntaxError("allocation info", htInfo, line)
		}
		if h.kind == htRaw {
			return false, r.syntaxError("allocation info", `no "a" record in raw data`, line)
		}
		h.kind = htInterpreted
		if len(h.sizes) >= MaxInfos {
			return false, fmt.Errorf("%s:%d: %w (more than %d)", r.name, r.lines.n, errTooManyInfos{}, MaxInfos)
		}
		h.sizes = append(h.sizes, size)
		h.labels = append(h.labels, h.htInterpretedLabel(r, node))
		return r.skip()
	case 'x', 'm', 't', 's', 'i':
		if cut {
			return false, r.longError("record", line)
		}
		return h.htStackRecord(r, line)
	}
	return r.skip()
}

// htAlloc allocates an object of allocation info idx.
func (h *heaptrackState) htAlloc(r *Reader, idx uint64, line []byte, ev *Event) (bool, error) {
	if idx >= uint64(len(h.sizes)) {
		return false, r.syntaxError("alloc", `an allocation info defined by an "a" record before`, line)
	}
	if h.nlive >= MaxLive {
		return false, r.liveError()
	}
	id := r.nextID
	r.nextID++
	if h.live == nil {
		h.live = map[uint64][]uint64{}
	}
	h.live[idx] = append(h.live[idx], id)
	h.nlive++
	*ev = Event{Op: Alloc, ID: id, Size: h.sizes[idx], Label: h.labels[idx]}
	return true, nil
}

// htFree frees the newest live object of allocation info idx.
func (h *heaptrackState) htFree(r *Reader, idx uint64, line []byte, ev *Event) (bool, error) {
	if idx >= uint64(len(h.sizes)) {
		return false, r.syntaxError("free", `an allocation info defined by an "a" record before`, line)
	}
	l := h.live[idx]
	if len(l) == 0 {
		r.stats.UnknownFrees++
		*ev = Event{Op: Free, ID: r.nextID}
		r.nextID++
		return true, nil
	}
	*ev = Event{Op: Free, ID: l[len(l)-1]}
	if len(l) == 1 {
		delete(h.live, idx)
	} else {
		h.live[idx] = l[:len(l)-1]
	}
	h.nlive--
	return true, nil
}

// htStackRecord reads a record of the call stacks: "x", "m" and "t" of
// raw data, "s", "i" and "t" of interpreted data.
func (h *heaptrackState) htStackRecord(r *Reader, line []byte) (bool, error) {
	kind := uint8(htRaw)
	if line[0] == 's' || line[0] == 'i' {
		kind = htInterpreted
	}
	if line[0] != 't' {
		if h.kind != htUnknown && h.kind != kind {
			return r.skip() // a record of the other kind: not this file's
		}
		h.kind = kind
	}
	switch line[0] {
	case 'x':
		s, ok := htString(line)
		if !ok {
			return false, r.syntaxError("executable", `"x <length> <path>"`, line)
		}
		h.exe = s
	case 'm':
		return h.htModule(r, line)
	case 's':
		s, ok := htString(line)
		if !ok {
			return false, r.syntaxError("string", `"s <length> <string>"`, line)
		}
		if h.strBytes += len(s) + 16; h.strBytes > maxHeaptrackStrings {
			return false, fmt.Errorf("%s:%d: %w (more than %d bytes)", r.name, r.lines.n, errTooManyStacks{"strings"}, maxHeaptrackStrings)
		}
		h.strs = append(h.strs, s)
	case 'i':
		return h.htIP(r, line)
	case 't':
		a, i, ok := hexField(line, 1)
		if ok {
			_, i, ok = hexField(line, i)
		}
		if !ok || !blank(line, i) {
			return false, r.syntaxError("trace node", `"t <return address or ip index> <parent node>"`, line)
		}
		if len(h.nodes) >= MaxStacks {
			return false, fmt.Errorf("%s:%d: %w (more than %d)", r.name, r.lines.n, errTooManyStacks{"trace nodes"}, MaxStacks)
		}
		h.nodes = append(h.nodes, a)
	}
	return r.skip()
}

// htString reads the "<length> <string>" of an "x", "m" or "s" record:
// a string of length bytes (hexadecimal), which may hold blanks.
func htString(line []byte) (string, bool) {
	s, _, ok := htStringAt(line, 1)
	return s, ok
}

// htStringAt reads "<length> <string>" from i and returns the index
// after the string.
func htStringAt(line []byte, i int) (string, int, bool) {
	n, i, ok := hexField(line, i)
	if !ok || i >= len(line) || line[i] != ' ' || n > uint64(len(line)-i-1) {
		return "", i, false
	}
	return string(line[i+1 : i+1+int(n)]), i + 1 + int(n), true
}

// htModule reads raw data's "m <length> <file> <load address> [<vaddr>
// <memsz>]...": the file's segments mapped at the load address plus
// each vaddr; "m 1 -" unloads every module (heaptrack writes them all
// again after a dlopen or dlclose), and the file "x" is the executable.
func (h *heaptrackState) htModule(r *Reader, line []byte) (bool, error) {
	const syntax = `"m <length> <file> <load address> [<vaddr> <memsz>]..." or "m 1 -"`
	file, i, ok := htStringAt(line, 1)
	if !ok {
		return false, r.syntaxError("module", syntax, line)
	}
	if file == "-" && blank(line, i) {
		r.cstacks.modules = r.cstacks.modules[:0]
		return r.skip()
	}
	if file == "x" {
		file = h.exe
	}
	base, i, ok := hexField(line, i)
	if !ok {
		return false, r.syntaxError("module", syntax, line)
	}
	m := Module{Path: file, Base: base, Lo: ^uint64(0)}
	for !blank(line, i) {
		var vaddr, size uint64
		if vaddr, i, ok = hexField(line, i); ok {
			size, i, ok = hexField(line, i)
		}
		if !ok {
			return false, r.syntaxError("module", syntax, line)
		}
		m.Lo, m.Hi = min(m.Lo, base+vaddr), max(m.Hi, base+vaddr+size)
	}
	if m.Lo >= m.Hi {
		return r.skip() // no segment: nothing to name
	}
	if err := r.cstacks.load(m); err != nil {
		return false, fmt.Errorf("%s:%d: %w (more than %d)", r.name, r.lines.n, err, MaxModules)
	}
	return r.skip()
}

// htIP reads interpreted data's "i <ip> <module> [<function> [<file>
// <line>]] [<function> <file> <line>]...", whose first frame is the
// innermost, and gives it its site's label.
func (h *heaptrackState) htIP(r *Reader, line []byte) (bool, error) {
	const syntax = `"i <ip> <module> [<function> [<file> <line>] [<function> <file> <line>]...]"`
	var f [4]uint64 // ip, module, function, file; then line
	i, n := 1, 0
	var ln uint64
	for ; n < 5 && !blank(line, i); n++ {
		var v uint64
		var ok bool
		if v, i, ok = hexField(line, i); !ok {
			return false, r.syntaxError("instruction pointer", syntax, line)
		}
		if n < 4 {
			f[n] = v
		} else {
			ln = v
		}
	}
	str := func(k uint64) string { // a string not defined (a file cut by hand) names nothing
		if k == 0 || k > uint64(len(h.strs)) {
			return ""
		}
		return h.strs[k-1]
	}
	if n < 2 {
		return false, r.syntaxError("instruction pointer", syntax, line)
	}
	mod, fn, file := str(f[1]), str(f[2]), str(f[3])
	if len(h.ips) >= MaxStacks {
		return false, fmt.Errorf("%s:%d: %w (more than %d)", r.name, r.lines.n, errTooManyStacks{"instruction pointers"}, MaxStacks)
	}
	var frames []Frame
	if fn != "" {
		frames = []Frame{{Function: fn, File: file, Line: int(min(ln, 1<<31))}}
	}
	l, err := r.labels.Intern(Label{Attrs: []Attr{{AttrSite, SiteName(frames, Module{Path: mod}, f[0])}}})
	if err != nil {
		return false, fmt.Errorf("%s:%d: %w", r.name, r.lines.n, err)
	}
	h.ips = append(h.ips, l)
	return r.skip()
}

// htInterpretedLabel returns the label of trace node node's site (0 for
// the root, or a node not defined: heaptrack's own files define each
// before use).
func (h *heaptrackState) htInterpretedLabel(r *Reader, node uint64) uint32 {
	if node == 0 || node > uint64(len(h.nodes)) {
		return 0
	}
	ip := h.nodes[node-1]
	if ip == 0 || ip > uint64(len(h.ips)) {
		return 0
	}
	return h.ips[ip-1]
}

// htRawLabel returns the label of raw trace node node's site, named at
// its first use with the modules then loaded.
func (h *heaptrackState) htRawLabel(r *Reader, node uint64) (uint32, error) {
	if node == 0 || node > uint64(len(h.nodes)) {
		return 0, nil
	}
	l, err := r.cstacks.siteLabel(r.labels, h.nodes[node-1])
	if err != nil {
		return 0, fmt.Errorf("%s:%d: %w", r.name, r.lines.n, err)
	}
	return l, nil
}
