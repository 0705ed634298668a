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
// Every other record (x, X, I, m, t, i, s, c, R, A, S, # comments) is
// skipped. The kind is told by the records themselves: an "a" record, or
// a "+" with one field, means interpreted.
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
	kind  uint8
	sizes []uint64            // interpreted: the size of each allocation info, 8 bytes each
	live  map[uint64][]uint64 // interpreted: the live objects of the infos that have any, newest last
	nlive int
}

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

// parseHeaptrack reads one record of heaptrack data.
func (r *Reader) parseHeaptrack(line []byte, cut bool, ev *Event) (bool, error) {
	if len(line) == 0 || len(line) > 1 && line[1] != ' ' && line[1] != '\t' {
		return r.skip()
	}
	h := &r.heap
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
			return r.htAlloc(a, line, ev)
		}
		_, i, ok = hexField(line, i)
		var p uint64
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
			return r.htFree(a, line, ev)
		}
		if a == 0 {
			r.stats.NullFrees++
			return false, nil
		}
		r.free(a, ev)
		return true, nil
	case 'a':
		size, i, ok := hexField(line, 1)
		if ok {
			_, i, ok = hexField(line, i)
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
		return r.skip()
	}
	return r.skip()
}

// htAlloc allocates an object of allocation info idx.
func (r *Reader) htAlloc(idx uint64, line []byte, ev *Event) (bool, error) {
	h := &r.heap
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
	*ev = Event{Op: Alloc, ID: id, Size: h.sizes[idx]}
	return true, nil
}

// htFree frees the newest live object of allocation info idx.
func (r *Reader) htFree(idx uint64, line []byte, ev *Event) (bool, error) {
	h := &r.heap
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
