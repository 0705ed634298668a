package trace

import (
	"encoding/binary"
	"fmt"
)

// Android's allocation records, as malloc_debug's record_allocs writes
// them and memory_replay replays them:
//
//	<tid>: malloc <ptr> <size>
//	<tid>: calloc <ptr> <nmemb> <size>
//	<tid>: memalign <ptr> <alignment> <size>
//	<tid>: realloc <new ptr> <old ptr> <size>
//	<tid>: free <ptr>
//	<tid>: thread_done 0x0
//
// Pointers are hexadecimal (with or without 0x), the rest decimal. Newer
// recorders append the start and end time of the call in nanoseconds
// (thread_done: the end time only); they are read and dropped. carve's
// recorder adds the call stacks of the allocations: its "stack" and
// "module" lines, and "@<stack>" at the end of a record (see cstack.go).

const (
	aospLine     = `"<tid>: <action> <ptr> [<args>]"`
	aospMalloc   = `"<tid>: malloc <ptr> <size> [<start ns> <end ns>] [@<stack>]"`
	aospCalloc   = `"<tid>: calloc <ptr> <nmemb> <size> [<start ns> <end ns>] [@<stack>]"`
	aospMemalign = `"<tid>: memalign <ptr> <alignment> <size> [<start ns> <end ns>] [@<stack>]"`
	aospRealloc  = `"<tid>: realloc <new ptr> <old ptr> <size> [<start ns> <end ns>] [@<stack>]"`
	aospFree     = `"<tid>: free <ptr> [<start ns> <end ns>]"`
	aospDone     = `"<tid>: thread_done 0x0 [<end ns>]"`
)

// aospImporter reads an AOSP trace: the call stacks of carve's recorder
// are the Reader's cStacks; it keeps nothing else between lines.
type aospImporter struct{}

func openAOSP(r *Reader, opt ReaderOptions) (importer, error) {
	r.labels, r.cstacks.sym = &Labels{}, opt.Symbolizer
	return aospImporter{}, nil
}

// isAOSPLine reports whether l is a line of an AOSP trace: a record
// ("<tid>: ..."), or carve's recorder's modules and stacks, before its
// first record.
func isAOSPLine(l []byte) bool {
	if hasAt(l, 0, "module 0x") || hasAt(l, 0, "stack ") {
		return true
	}
	_, i, ok := dec(l, 0)
	return ok && hasAt(l, i, ": ")
}

func (aospImporter) end(*Reader) (bool, error) { return false, nil }

// line reads one line of an AOSP trace. It is the hot path of the
// parse benchmark: every field is read in place, and the action is
// matched on its bytes.
func (aospImporter) line(r *Reader, line []byte, cut bool, ev *Event) (bool, error) {
	if cut {
		return false, r.longError("line", line)
	}
	r.site = 0
	switch {
	case hasAt(line, 0, "stack "):
		return r.parseAOSPStack(line)
	case hasAt(line, 0, "module "):
		return r.parseAOSPModule(line)
	}
	tid, i, ok := dec(line, 0)
	if !ok || !hasAt(line, i, ": ") || tid > 1<<32-1 {
		if blank(line, 0) {
			return r.skip()
		}
		err := r.syntaxError("line", aospLine, line)
		if e := err.(*Error); ok && tid > 1<<32-1 {
			e.Why = fmt.Sprintf("the thread id %d does not fit in 32 bits", tid)
		}
		return false, err
	}
	r.tid = uint32(tid)
	i += 2
	if act, p, size, j, ok := aospCommon(line, i); ok && j == len(line) {
		return r.aospApply(act, p, size, ev)
	}
	// The general path: a record's fields, then aospRest's end.
	var p, a, b uint64
	act, j := aospAction(line, i)
	switch act {
	case aospMallocOp:
		if p, i, ok = xptrField(line, j); ok {
			a, i, ok = decField(line, i)
		}
		if !ok {
			return false, r.syntaxError("malloc", aospMalloc, line)
		}
		if err := r.aospRest(line, i, 2, "malloc", aospMalloc); err != nil {
			return false, err
		}
		return r.born(p, ev, Event{Op: Alloc, Size: a})
	case aospFreeOp:
		if p, i, ok = xptrField(line, j); !ok || i != len(line) && !aospEnd(line, i, 2) {
			return false, r.syntaxError("free", aospFree, line)
		}
		if p == 0 {
			r.stats.NullFrees++
			return false, nil
		}
		r.free(p, ev)
		return true, nil
	case aospCallocOp:
		if p, i, ok = xptrField(line, j); ok {
			if a, i, ok = decField(line, i); ok {
				b, i, ok = decField(line, i)
			}
		}
		if !ok {
			return false, r.syntaxError("calloc", aospCalloc, line)
		}
		if err := r.aospRest(line, i, 2, "calloc", aospCalloc); err != nil {
			return false, err
		}
		c, ok := callocEvent(0, a, b)
		if !ok && p == 0 {
			r.stats.Failed++ // calloc refuses a product past 2^64, and returns NULL
			return false, nil
		}
		if !ok {
			return false, r.syntaxError("calloc", "<nmemb> × <size> below 2^64 (a calloc that returned memory)", line)
		}
		return r.born(p, ev, Event{Op: Calloc, N: c.N, Size: c.Size})
	case aospMemalignOp:
		if p, i, ok = xptrField(line, j); ok {
			if a, i, ok = decField(line, i); ok {
				b, i, ok = decField(line, i)
			}
		}
		if !ok {
			return false, r.syntaxError("memalign", aospMemalign, line)
		}
		if err := r.aospRest(line, i, 2, "memalign", aospMemalign); err != nil {
			return false, err
		}
		align, ok := roundAlign(a)
		if !ok {
			return false, r.syntaxError("memalign", "an alignment up to 2^31", line)
		}
		return r.born(p, ev, Event{Op: Memalign, Align: align, Size: b})
	case aospReallocOp:
		var old uint64
		if p, i, ok = xptrField(line, j); ok {
			if old, i, ok = xptrField(line, i); ok {
				a, i, ok = decField(line, i)
			}
		}
		if !ok {
			return false, r.syntaxError("realloc", aospRealloc, line)
		}
		if err := r.aospRest(line, i, 2, "realloc", aospRealloc); err != nil {
			return false, err
		}
		return r.reallocCall(old, p, a, ev)
	case aospDoneOp:
		if _, i, ok = xptrField(line, j); !ok || i != len(line) && !aospEnd(line, i, 1) {
			return false, r.syntaxError("thread_done", aospDone, line)
		}
		r.stats.ThreadsDone++
		return false, nil
	}
	return false, r.syntaxError("line", `an action malloc, calloc, memalign, realloc, free or thread_done`, line)
}

// The actions of AOSP lines.
const (
	aospNone = iota
	aospMallocOp
	aospFreeOp
	aospCallocOp
	aospMemalignOp
	aospReallocOp
	aospDoneOp
)

// Words of 8 bytes as a little-endian load reads them.
const (
	wordMalloc0 = uint64('m') | uint64('a')<<8 | uint64('l')<<16 | uint64('l')<<24 |
		uint64('o')<<32 | uint64('c')<<40 | uint64(' ')<<48 | uint64('0')<<56 // "malloc 0"
	wordFree0x = uint64('f') | uint64('r')<<8 | uint64('e')<<16 | uint64('e')<<24 |
		uint64(' ')<<32 | uint64('0')<<40 | uint64('x')<<48 // "free 0x", 7 bytes
)

// aospCommon reads the two lines that make most of any trace, in the
// shape the recorder writes them: "malloc 0x<ptr> <size>" and
// "free 0x<ptr>" from i on, with a pointer that is not NULL, and returns
// the index after them, where the line must end. The action is matched
// with one 8-byte compare. Anything else (ok false) takes the general
// path, which also reports errors.
func aospCommon(b []byte, i int) (act int, p, size uint64, j int, ok bool) {
	if len(b)-i < 9 {
		return 0, 0, 0, 0, false
	}
	w := binary.LittleEndian.Uint64(b[i:])
	switch {
	case w == wordMalloc0 && b[i+8] == 'x':
		act, j = aospMallocOp, i+9
	case w&(1<<56-1) == wordFree0x:
		act, j = aospFreeOp, i+7
	default:
		return 0, 0, 0, 0, false
	}
	if p, j, ok = hex(b, j); !ok || p == 0 {
		return 0, 0, 0, 0, false
	}
	if act == aospFreeOp {
		return act, p, 0, j, true
	}
	if j+1 >= len(b) || b[j] != ' ' {
		return 0, 0, 0, 0, false
	}
	size, j, ok = dec(b, j+1)
	return act, p, size, j, ok
}

// aospCommonLine is a common AOSP line: its fields, and its length with
// its line feed.
type aospCommonLine struct {
	tid      uint32
	act      int
	p, size  uint64
	stack    uint64 // the malloc's stack, when hasStack
	hasStack bool
	n        int
}

// aospBuffered reads a common line (see aospCommon) at the start of b,
// the Reader's unread buffer, without looking for the line's end first:
// the fields are read in place and the line feed must follow them. ok is
// false for any other line, which then takes the general path. This
// saves the pass that finds the line feed.
func aospBuffered(b []byte) (l aospCommonLine, ok bool) {
	t, i, ok := dec(b, 0)
	if !ok || t > 1<<32-1 || !hasAt(b, i, ": ") {
		return aospCommonLine{}, false
	}
	act, p, size, j, ok := aospCommon(b, i+2)
	if !ok || j >= len(b) {
		return aospCommonLine{}, false
	}
	l = aospCommonLine{tid: uint32(t), act: act, p: p, size: size}
	if b[j] == ' ' && j+1 < len(b) && b[j+1] == '@' && act == aospMallocOp {
		if l.stack, j, ok = dec(b, j+2); !ok || j >= len(b) {
			return aospCommonLine{}, false
		}
		l.hasStack = true
	}
	if b[j] != '\n' {
		return aospCommonLine{}, false
	}
	l.n = j + 1
	return l, true
}

// buffered records the next line and returns its event if it is a common
// one, read in the buffer; ok is false otherwise, and nothing is read.
func (aospImporter) buffered(r *Reader, ev *Event) (ok bool, err error) {
	l := r.lines
	line, ok := aospBuffered(l.buf[l.r:l.w])
	if !ok {
		return false, nil
	}
	r.site = 0
	if line.hasStack {
		if r.site, ok = r.cstacks.stackLabel(line.stack); !ok {
			return false, nil // the general path says so
		}
	}
	l.r += line.n
	l.n++
	r.tid = line.tid
	return r.aospApply(line.act, line.p, line.size, ev)
}

// aospApply records a common line's malloc or free.
func (r *Reader) aospApply(act int, p, size uint64, ev *Event) (bool, error) {
	if act == aospFreeOp {
		r.free(p, ev)
		return true, nil
	}
	e, err := r.alloc(p, ev)
	if err != nil {
		return false, err
	}
	e.Op, e.Size = Alloc, size
	return true, nil
}

// aospAction returns the action at i, when a blank or the end follows
// it, and the index after it. Each candidate is compared as a constant,
// which the compiler turns into a load and a compare or two.
func aospAction(b []byte, i int) (act, j int) {
	if i >= len(b) {
		return aospNone, i
	}
	switch b[i] {
	case 'm':
		switch {
		case hasAt(b, i, "malloc"):
			act, j = aospMallocOp, i+6
		case hasAt(b, i, "memalign"):
			act, j = aospMemalignOp, i+8
		}
	case 'f':
		if hasAt(b, i, "free") {
			act, j = aospFreeOp, i+4
		}
	case 'c':
		if hasAt(b, i, "calloc") {
			act, j = aospCallocOp, i+6
		}
	case 'r':
		if hasAt(b, i, "realloc") {
			act, j = aospReallocOp, i+7
		}
	case 't':
		if hasAt(b, i, "thread_done") {
			act, j = aospDoneOp, i+11
		}
	}
	if act == aospNone || j < len(b) && b[j] != ' ' && b[j] != '\t' {
		return aospNone, i
	}
	return act, j
}

// reallocCall records realloc(old, size) = p with C's meaning, shared by
// the importers whose traces record the call whole:
// realloc(NULL, size) is an allocation; a NULL result with size 0 is
// glibc's realloc(p, 0), a free; a NULL result with a size is a failure
// that leaves the old block live.
func (r *Reader) reallocCall(old, p, size uint64, ev *Event) (bool, error) {
	switch {
	case p == 0 && size == 0 && old != 0:
		r.free(old, ev)
		return true, nil
	case p == 0:
		r.stats.Failed++
		return false, nil
	case old == 0:
		e, err := r.alloc(p, ev)
		if err != nil {
			return false, err
		}
		e.Op, e.Size = Alloc, size
		return true, nil
	}
	if err := r.realloc(old, p, size, ev); err != nil {
		return false, err
	}
	return true, nil
}

// aospEnd reports whether the line ends at i, or after up to n decimal
// timestamps (all n of them, or none).
func aospEnd(b []byte, i, n int) bool {
	if blank(b, i) {
		return true
	}
	for k := 0; k < n; k++ {
		var ok bool
		if _, i, ok = decField(b, i); !ok {
			return false
		}
	}
	return blank(b, i)
}

// xptrField reads a blank and then a hexadecimal pointer, with or without
// its 0x (the recorder writes it; sscanf's %x reads both).
func xptrField(b []byte, i int) (uint64, int, bool) {
	i, ok := space(b, i)
	if !ok {
		return 0, i, false
	}
	if i+1 < len(b) && b[i] == '0' && (b[i+1] == 'x' || b[i+1] == 'X') {
		i += 2
	}
	return hex(b, i)
}
