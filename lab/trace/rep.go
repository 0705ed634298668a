package trace

import "fmt"

// The CS:APP malloc lab's trace format (.rep), as its driver mdriver.c
// reads it: four header numbers (suggested heap size, number of ids,
// number of ops, weight), then one request a line. Many distributions of
// the lab write two (number of ids, number of ops): the header is the
// numbers that come before the first request, two or four of them.

const (
	repHeader  = `a header of four numbers ("<heap size> <ids> <ops> <weight>") or two ("<ids> <ops>") before the first request`
	repAlloc   = `"a <id> <size>"`
	repRealloc = `"r <id> <size>"`
	repFree    = `"f <id>"`
	repAny     = `a request "a <id> <size>", "r <id> <size>" or "f <id>"`
)

// RepHeader returns the four numbers of a .rep trace's header: suggested
// heap size, number of ids, number of ops, weight. A header of two numbers
// fills ids and ops, and leaves the others 0. They are read, not checked
// (mdriver's traces do not always agree with their counts). It is zero for
// other formats, and before the first event.
func (r *Reader) RepHeader() [4]uint64 {
	if s, ok := r.imp.(*repState); ok {
		return s.header
	}
	return [4]uint64{}
}

// repState is what the .rep importer keeps between lines.
type repState struct {
	header  [4]uint64 // heap size, IDs, ops, weight
	nh      int       // header numbers read
	started bool      // a request was read: the header is over
}

func openRep(*Reader, ReaderOptions) (importer, error) { return &repState{}, nil }

// isRepLine reports whether l is a line of a .rep trace's header: decimal
// numbers from its first byte on.
func isRepLine(l []byte) bool {
	if _, _, ok := dec(l, 0); !ok {
		return false
	}
	_, ok := repHeaderLine(l)
	return ok
}

func (s *repState) end(r *Reader) (bool, error) {
	if !s.started && s.nh != 2 && s.nh != 4 {
		return false, r.endError("header", repHeader)
	}
	return false, nil
}

// line reads one line of a .rep trace. The trace's ids name blocks
// the way a program's addresses do (mdriver keeps one pointer per id), so
// they go through the same mapping: the objects are numbered anew, in
// order of birth, and "r" on an id that holds no block is an allocation,
// as realloc(NULL) is in mdriver.
func (s *repState) line(r *Reader, line []byte, cut bool, ev *Event) (bool, error) {
	if cut {
		return false, r.longError("line", line)
	}
	if blank(line, 0) {
		return r.skip()
	}
	if !s.started {
		if b := line[firstNonSpace(line)]; b >= '0' && b <= '9' {
			return s.headerLine(r, line)
		}
		switch s.nh {
		case 2: // ids, ops
			s.header = [4]uint64{0, s.header[0], s.header[1], 0}
		case 4:
		default:
			return false, r.syntaxError("header", repHeader+fmt.Sprintf(", got %d numbers, then", s.nh), line)
		}
		s.started = true
	}
	var (
		id, size uint64
		ok       bool
		i        int
	)
	if len(line) > 1 && line[1] != ' ' && line[1] != '\t' {
		return false, r.syntaxError("line", repAny, line)
	}
	switch line[0] {
	case 'a':
		if id, i, ok = decField(line, 1); ok {
			size, i, ok = decField(line, i)
		}
		if !ok || !blank(line, i) || id == 1<<64-1 {
			return false, r.syntaxError("alloc", repAlloc, line)
		}
		e, err := r.alloc(id+1, ev)
		if err != nil {
			return false, err
		}
		e.Op, e.Size = Alloc, size
	case 'r':
		if id, i, ok = decField(line, 1); ok {
			size, i, ok = decField(line, i)
		}
		if !ok || !blank(line, i) || id == 1<<64-1 {
			return false, r.syntaxError("realloc", repRealloc, line)
		}
		if err := r.realloc(id+1, id+1, size, ev); err != nil {
			return false, err
		}
	case 'f':
		if id, i, ok = decField(line, 1); !ok || !blank(line, i) || id == 1<<64-1 {
			return false, r.syntaxError("free", repFree, line)
		}
		r.free(id+1, ev)
	default:
		return false, r.syntaxError("line", repAny, line)
	}
	return true, nil
}

// headerLine reads header numbers, any number of them on a line, as
// fscanf does; more than four is an error.
func (s *repState) headerLine(r *Reader, line []byte) (bool, error) {
	i := 0
	for {
		i, _ = space(line, i)
		if i == len(line) {
			return r.skip()
		}
		v, j, ok := dec(line, i)
		if !ok || s.nh == 4 {
			return false, r.syntaxError("header", repHeader, line)
		}
		s.header[s.nh] = v
		s.nh++
		i = j
	}
}

// firstNonSpace returns the index of the first byte of line that is not a
// space or a tab (line is not blank).
func firstNonSpace(line []byte) int {
	i, _ := space(line, 0)
	return min(i, len(line)-1)
}
