package trace

// The CS:APP malloc lab's trace format (.rep), as its driver mdriver.c
// reads it: four header numbers (suggested heap size, number of ids,
// number of ops, weight), then one request a line.

const (
	repHeader  = `"<heap size>", "<ids>", "<ops>", "<weight>": four numbers`
	repAlloc   = `"a <id> <size>"`
	repRealloc = `"r <id> <size>"`
	repFree    = `"f <id>"`
	repAny     = `a request "a <id> <size>", "r <id> <size>" or "f <id>"`
)

// RepHeader returns the four numbers of a .rep trace's header: suggested
// heap size, number of ids, number of ops, weight. They are read, not
// checked (mdriver's traces do not always agree with their counts). It is
// zero for other formats, and before the first event.
func (r *Reader) RepHeader() [4]uint64 { return r.rep.header }

// parseRep reads one line of a .rep trace. The trace's ids name blocks
// the way a program's addresses do (mdriver keeps one pointer per id), so
// they go through the same mapping: the objects are numbered anew, in
// order of birth, and "r" on an id that holds no block is an allocation,
// as realloc(NULL) is in mdriver.
func (r *Reader) parseRep(line []byte, cut bool, ev *Event) (bool, error) {
	if cut {
		return false, r.syntaxError("line", repAny, line)
	}
	if blank(line, 0) {
		return r.skip()
	}
	if r.rep.nh < 4 {
		return r.repHeaderLine(line)
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

// repHeaderLine reads header numbers, any number of them on a line, as
// fscanf does.
func (r *Reader) repHeaderLine(line []byte) (bool, error) {
	i := 0
	for r.rep.nh < 4 {
		i, _ = space(line, i)
		if i == len(line) {
			return r.skip()
		}
		v, j, ok := dec(line, i)
		if !ok {
			return false, r.syntaxError("header", repHeader, line)
		}
		r.rep.header[r.rep.nh] = v
		r.rep.nh++
		i = j
	}
	if !blank(line, i) {
		return false, r.syntaxError("header", repHeader, line)
	}
	return r.skip()
}
