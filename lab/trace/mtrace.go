package trace

// glibc's mtrace() log (malloc/mtrace-impl.c). Each call is one line, the
// caller first when glibc knows it:
//
//	= Start
//	@ ./prog:(main+0x1a)[0x4005e1] + 0x1b1e460 0x10     malloc, calloc, memalign, realloc(NULL, n)
//	@ ./prog:[0x4005f1] - 0x1b1e460                     free, realloc(p, 0)
//	@ [0x400601] < 0x1b1e4a0                            realloc(p, n): the old block...
//	@ [0x400601] > 0x1b1e4d0 0x20                       ...and the new one, on the next line
//	@ [0x400611] ! 0x1b1e4d0 0x40                       realloc that failed
//	= End
//
// Sizes are printed with %#lx ("0x10", and "0" for zero); a NULL pointer
// as "(nil)". The caller's text may hold anything (file names with
// spaces), so a line is read from its end.

const (
	mtraceLine = `"[@ <caller>] <op> <ptr> [<size>]" with op +, -, <, > or !`
	mtraceMore = `"> <ptr> <size>" after "<"`
)

// mtraceState is what the mtrace importer keeps between lines.
type mtraceState struct {
	old     uint64 // the address of a "<" line, waiting for its ">"
	pending bool
}

func openMtrace(*Reader, ReaderOptions) (importer, error) { return &mtraceState{}, nil }

// isMtraceLine reports whether l is a line of an mtrace log: its start,
// a call with its caller, or a malloc or free without one ("+ 0x55...
// 0x10").
func isMtraceLine(l []byte) bool {
	return hasAt(l, 0, "= Start") || hasAt(l, 0, "@ ") ||
		len(l) >= 2 && l[1] == ' ' && (l[0] == '+' || l[0] == '-') && (hasAt(l, 2, "0x") || hasAt(l, 2, "(nil)"))
}

func (s *mtraceState) end(r *Reader) (bool, error) {
	if s.pending {
		return false, r.endError("realloc", mtraceMore)
	}
	return false, nil
}

// line reads one line of an mtrace log.
func (s *mtraceState) line(r *Reader, line []byte, cut bool, ev *Event) (bool, error) {
	if !cut && (blank(line, 0) || line[0] == '=') {
		if s.pending {
			return false, r.syntaxError("realloc", mtraceMore, line)
		}
		return r.skip()
	}
	if cut {
		return false, r.longError("line", line)
	}
	op, p, size, ok := mtraceFields(line)
	if !ok {
		return false, r.syntaxError("line", mtraceLine, line)
	}
	if s.pending != (op == '>') {
		if op == '>' {
			return false, r.syntaxError("realloc", `"< <ptr>" before ">"`, line)
		}
		return false, r.syntaxError("realloc", mtraceMore, line)
	}
	switch op {
	case '+':
		return r.born(p, ev, Event{Op: Alloc, Size: size})
	case '-':
		if p == 0 {
			r.stats.NullFrees++
			return false, nil
		}
		r.free(p, ev)
		return true, nil
	case '<':
		s.pending, s.old = true, p
		return false, nil
	case '>':
		s.pending = false
		return r.reallocCall(s.old, p, size, ev)
	default: // '!'
		r.stats.Failed++
		return false, nil
	}
}

// mtraceFields reads the op, pointer and size at the end of an mtrace
// line; what comes before must be the caller ("@ ..."), or nothing.
func mtraceFields(line []byte) (op byte, p, size uint64, ok bool) {
	e1 := trimBlanksRight(line, len(line))
	s1 := wordLeft(line, e1)
	e2 := trimBlanksRight(line, s1)
	s2 := wordLeft(line, e2)
	var start int
	switch {
	case e2-s2 == 1 && (line[s2] == '-' || line[s2] == '<'):
		op, start = line[s2], s2
		if p, ok = ptrTok(line, s1, e1); !ok {
			return 0, 0, 0, false
		}
	default:
		e3 := trimBlanksRight(line, s2)
		s3 := wordLeft(line, e3)
		if e3-s3 != 1 || line[s3] != '+' && line[s3] != '>' && line[s3] != '!' {
			return 0, 0, 0, false
		}
		op, start = line[s3], s3
		if p, ok = ptrTok(line, s2, e2); !ok {
			return 0, 0, 0, false
		}
		if size, ok = ptrTok(line, s1, e1); !ok {
			return 0, 0, 0, false
		}
	}
	if start > 0 && !hasAt(line, 0, "@ ") {
		return 0, 0, 0, false
	}
	return op, p, size, true
}

// ptrTok reads the pointer that is the whole of b[s:e].
func ptrTok(b []byte, s, e int) (uint64, bool) {
	v, j, ok := ptr(b[:e], s)
	return v, ok && j == e
}

// trimBlanksRight returns the end of b[:end] without trailing blanks.
func trimBlanksRight(b []byte, end int) int {
	for end > 0 && (b[end-1] == ' ' || b[end-1] == '\t') {
		end--
	}
	return end
}

// wordLeft returns the start of the run of non-blank bytes ending at end.
func wordLeft(b []byte, end int) int {
	for end > 0 && b[end-1] != ' ' && b[end-1] != '\t' {
		end--
	}
	return end
}
