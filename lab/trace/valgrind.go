package trace

import "bytes"

// valgrind's --trace-malloc=yes log (coregrind/m_replacemalloc/
// vg_replace_malloc.c). Each intercepted call is printed as a debug
// message, "--<pid>-- " and the call, in the log among valgrind's other
// messages ("==<pid>== ..."), which are skipped:
//
//	--4711-- malloc(16) = 0x4A40040
//	--4711-- calloc(3,8) = 0x4A40090
//	--4711-- realloc(0x4A400F0,4000) = 0x4A40160
//	--4711-- memalign(al 64, size 100) = 0x4A41180
//	--4711-- _ZnwmSt11align_val_t(size 100, al 64) = 0x4A41200
//	--4711-- free(0x4A40040)
//
// The allocating functions print their mangled names (_Znwm for operator
// new(unsigned long), _ZdlPv for operator delete(void*)...): every name
// of operator new and delete is read as malloc and free. Functions that
// do not allocate (malloc_usable_size, mallinfo) and unknown names are
// skipped.
//
// Quirks of particular versions, all handled: realloc(NULL, n) printed as
// the malloc it calls ("realloc(0x0,40)malloc(40) = 0x..."), or as malloc
// alone (3.19); realloc(p, 0) printed as "realloc(0x...,0)free(0x...)"
// with its " = 0" on the next line; posix_memalign and aligned_alloc
// printed as memalign (3.19), or without their result (3.20 and later:
// such allocations are invisible, see ReaderStats.Invisible; aligned_alloc
// then prints no line feed either, and the next call follows on its line);
// a malloc or calloc whose result another thread's call interrupted
// ("malloc(1573)free(0x52B1860)"), likewise invisible. With
// --time-stamp=yes the prefix holds the time, "--00:00:00:02.657 4711-- ";
// it is skipped.

const (
	vgAlloc    = `"malloc(<size>) = <ptr>"`
	vgAligned  = `"<name>(size <size>, al <align>) = <ptr>"`
	vgCalloc   = `"calloc(<n>,<size>) = <ptr>"`
	vgRealloc  = `"realloc(<ptr>,<size>) = <ptr>"`
	vgMemalign = `"memalign(al <align>, size <size>) = <ptr>"`
	vgFree     = `"free(<ptr>)"`
)

// valgrindPrefix returns the length of a debug message's prefix
// "--<pid>-- ", or "--<time> <pid>-- " with --time-stamp=yes, or 0.
func valgrindPrefix(l []byte) int {
	if !hasAt(l, 0, "--") {
		return 0
	}
	i := 2
	if j := word(l, i); bytes.IndexByte(l[i:j], ':') >= 0 { // 00:00:00:02.657
		i = j + 1
	}
	_, i, ok := dec(l, i)
	if !ok || !hasAt(l, i, "-- ") {
		return 0
	}
	return i + 3
}

// vgKind classifies a function name.
type vgKind uint8

const (
	vgOther vgKind = iota
	vgMalloc
	vgCallocK
	vgReallocK
	vgMemalignK
	vgNoResult // posix_memalign in valgrind 3.20+: no address printed
	vgFreeK
)

func vgClassify(name []byte) vgKind {
	switch string(name) {
	case "malloc", "valloc", "pvalloc", "__builtin_new", "__builtin_vec_new":
		return vgMalloc
	case "calloc":
		return vgCallocK
	case "realloc":
		return vgReallocK
	case "memalign", "aligned_alloc":
		return vgMemalignK
	case "posix_memalign":
		return vgNoResult
	case "free", "cfree", "__builtin_delete", "__builtin_vec_delete":
		return vgFreeK
	}
	switch {
	case hasAt(name, 0, "_Znw"), hasAt(name, 0, "_Zna"):
		return vgMalloc
	case hasAt(name, 0, "_Zdl"), hasAt(name, 0, "_Zda"):
		return vgFreeK
	}
	return vgOther
}

// valgrindImporter reads a valgrind log: it keeps nothing between lines.
type valgrindImporter struct{}

func openValgrind(*Reader, ReaderOptions) (importer, error) { return valgrindImporter{}, nil }

// isValgrindLine reports whether l is a line of valgrind's: a traced
// call ("--<pid>-- ...") or one of its messages ("==<pid>== ...").
func isValgrindLine(l []byte) bool { return valgrindPrefix(l) > 0 || valgrindMessage(l) }

func (valgrindImporter) end(*Reader) (bool, error) { return false, nil }

// line reads one line of a valgrind log.
func (valgrindImporter) line(r *Reader, line []byte, cut bool, ev *Event) (bool, error) {
	i := valgrindPrefix(line)
	if i == 0 {
		return r.skip()
	}
	return r.vgCall(line, i, cut, ev)
}

// vgCall reads the call at line[i:].
func (r *Reader) vgCall(line []byte, i int, cut bool, ev *Event) (bool, error) {
	name, i := vgName(line, i)
	kind := vgClassify(name)
	if kind == vgOther || i == len(line) || line[i] != '(' {
		return r.skip()
	}
	if cut {
		return false, r.longError(string(name), line)
	}
	i++
	switch kind {
	case vgMalloc:
		size, align, j, ok := vgSize(line, i)
		p, j, ok2 := vgResult(line, j)
		if ok && !ok2 && vgFollows(line, j) {
			// The result was lost to another thread's call (below).
			r.stats.Invisible++
			return r.vgCall(line, j, cut, ev)
		}
		if !ok || !ok2 || !blank(line, j) {
			want := vgAlloc
			if align != 0 || hasAt(line, i, "size") {
				want = vgAligned
			}
			return false, r.syntaxError(string(name), want, line)
		}
		var a uint32
		if align != 0 && p != 0 {
			if a, ok = roundAlign(align); !ok {
				return false, r.syntaxError(string(name), "an alignment up to 2^31", line)
			}
		}
		return r.born(p, ev, Event{Op: Alloc, Size: size, Align: a})
	case vgCallocK:
		n, j, ok := dec(line, i)
		var size, p uint64
		if ok && hasAt(line, j, ",") {
			size, j, ok = dec(line, j+1)
		} else {
			ok = false
		}
		if ok && hasAt(line, j, ")") {
			j++
			if vgFollows(line, j) {
				r.stats.Invisible++
				return r.vgCall(line, j, cut, ev)
			}
			p, j, ok = vgResult(line, j)
		} else {
			ok = false
		}
		if !ok || !blank(line, j) {
			return false, r.syntaxError("calloc", vgCalloc, line)
		}
		c, ok := callocEvent(0, n, size)
		if !ok && p == 0 {
			r.stats.Failed++ // calloc refuses a product past 2^64, and returns NULL
			return false, nil
		}
		if !ok {
			return false, r.syntaxError("calloc", "<n> × <size> below 2^64 (a calloc that returned memory)", line)
		}
		return r.born(p, ev, Event{Op: Calloc, N: c.N, Size: c.Size})
	case vgReallocK:
		return r.vgRealloc(line, i, ev)
	case vgMemalignK, vgNoResult:
		var align, size uint64
		ok := hasAt(line, i, "al ")
		j := i + 3
		if ok {
			align, j, ok = dec(line, j)
		}
		if ok && hasAt(line, j, ", size ") {
			size, j, ok = dec(line, j+7)
		} else {
			ok = false
		}
		if ok && hasAt(line, j, ")") {
			j++
		} else {
			ok = false
		}
		if !ok {
			return false, r.syntaxError(string(name), vgMemalign, line)
		}
		if blank(line, j) { // no result printed
			r.stats.Invisible++
			return false, nil
		}
		if _, k := vgName(line, j); k > j && hasAt(line, k, "(") {
			// No result, and no line feed either (aligned_alloc in 3.20
			// and later): the next call follows on the same line.
			r.stats.Invisible++
			return r.vgCall(line, j, cut, ev)
		}
		p, j, ok := vgResult(line, j)
		if !ok || !blank(line, j) {
			return false, r.syntaxError(string(name), vgMemalign, line)
		}
		a, ok := roundAlign(align)
		if !ok {
			return false, r.syntaxError(string(name), "an alignment up to 2^31", line)
		}
		return r.born(p, ev, Event{Op: Memalign, Align: a, Size: size})
	default: // vgFreeK
		p, j, ok := ptr(line, i)
		if !ok || !hasAt(line, j, ")") || !blank(line, j+1) {
			return false, r.syntaxError(string(name), vgFree, line)
		}
		if p == 0 {
			r.stats.NullFrees++
			return false, nil
		}
		r.free(p, ev)
		return true, nil
	}
}

// vgFollows reports whether another call starts at line[j:], where a
// call's " = <result>" should be: valgrind, tracing a threaded program,
// can switch threads between printing a call and printing its result,
// and the result is then lost. The call's block is invisible (see
// ReaderStats.Invisible), and the line goes on with the other call.
func vgFollows(line []byte, j int) bool {
	_, k := vgName(line, j)
	return k > j && hasAt(line, k, "(")
}

// vgRealloc reads the arguments and result of realloc, with the versions'
// quirks: a malloc or free printed inside it.
func (r *Reader) vgRealloc(line []byte, i int, ev *Event) (bool, error) {
	old, j, ok := ptr(line, i)
	var size uint64
	if ok && hasAt(line, j, ",") {
		size, j, ok = dec(line, j+1)
	} else {
		ok = false
	}
	if !ok || !hasAt(line, j, ")") {
		return false, r.syntaxError("realloc", vgRealloc, line)
	}
	j++
	if hasAt(line, j, "malloc(") && old == 0 { // realloc(NULL, n) calling malloc(n)
		n, k, ok := dec(line, j+7)
		var p uint64
		if ok && hasAt(line, k, ")") {
			p, k, ok = vgResult(line, k+1)
		} else {
			ok = false
		}
		if !ok || !blank(line, k) {
			return false, r.syntaxError("realloc", `"realloc(0x0,<size>)malloc(<size>) = <ptr>"`, line)
		}
		return r.reallocCall(0, p, n, ev)
	}
	if hasAt(line, j, "free(") && size == 0 { // realloc(p, 0) calling free(p)
		p, k, ok := ptr(line, j+5)
		if !ok || p != old || !hasAt(line, k, ")") || !blank(line, k+1) {
			return false, r.syntaxError("realloc", `"realloc(<ptr>,0)free(<ptr>)"`, line)
		}
		return r.reallocCall(old, 0, 0, ev)
	}
	p, j, ok := vgResult(line, j)
	if !ok || !blank(line, j) {
		return false, r.syntaxError("realloc", vgRealloc, line)
	}
	return r.reallocCall(old, p, size, ev)
}

// vgName reads a C identifier at i.
func vgName(b []byte, i int) (name []byte, j int) {
	j = i
	for j < len(b) {
		c := b[j]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || j > i && c >= '0' && c <= '9' {
			j++
			continue
		}
		break
	}
	return b[i:j], j
}

// vgSize reads the arguments of an allocating function after its "(":
// "<size>)" or, for aligned operator new, "size <size>, al <align>)".
func vgSize(b []byte, i int) (size, align uint64, j int, ok bool) {
	if hasAt(b, i, "size ") {
		size, j, ok = dec(b, i+5)
		if !ok || !hasAt(b, j, ", al ") {
			return 0, 0, j, false
		}
		if align, j, ok = dec(b, j+5); !ok || align == 0 {
			return 0, 0, j, false
		}
	} else if size, j, ok = dec(b, i); !ok {
		return 0, 0, j, false
	}
	if !hasAt(b, j, ")") {
		return 0, 0, j, false
	}
	return size, align, j + 1, true
}

// vgResult reads " = <ptr>".
func vgResult(b []byte, i int) (uint64, int, bool) {
	if !hasAt(b, i, " = ") {
		return 0, i, false
	}
	return ptr(b, i+3)
}
