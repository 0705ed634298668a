package trace

import (
	"fmt"
	"math/bits"
	"unsafe"
)

// Op is what an event does to its object.
type Op uint8

// The operations. The zero Op is not an operation: a Reader never returns
// it and a Writer refuses it.
const (
	// Alloc starts the life of object ID with Size bytes (malloc, operator
	// new), aligned to Align when Align is not 0 (aligned operator new).
	Alloc Op = iota + 1
	// Free ends the life of object ID.
	Free
	// Realloc resizes the live object ID to Size bytes; the object keeps
	// its ID whether or not the allocator moves it.
	Realloc
	// Calloc starts the life of object ID with Size bytes, zeroed, asked
	// for as N elements of Size/N bytes.
	Calloc
	// Memalign starts the life of object ID with Size bytes aligned to
	// Align (memalign, posix_memalign, aligned_alloc).
	Memalign

	// NumOps is one more than the last operation: the length of an array
	// indexed by Op, whose first entry is unused.
	NumOps = iota + 1
)

var opNames = [NumOps]string{"", "alloc", "free", "realloc", "calloc", "memalign"}

// String returns the operation's name: "alloc", "free", "realloc",
// "calloc" or "memalign".
func (o Op) String() string {
	if o == 0 || o >= NumOps {
		return fmt.Sprintf("Op(%d)", uint8(o))
	}
	return opNames[o]
}

// Valid reports whether o is one of the operations.
func (o Op) Valid() bool { return o != 0 && o < NumOps }

// Event is one operation of a trace. It is 40 bytes, and readers and
// writers pass it by value, by the million. (The Label field took it from
// 32 bytes to 40; parsing and replaying were measured before and after,
// and the labels travel with the events that carry them, through any
// Source, to any consumer: see the package documentation.)
//
// Contract (every Reader returns only such events; a Writer refuses others):
//   - Op is valid.
//   - Align is 0 (the allocator's default) or a power of two; it is used
//     by Alloc and Memalign only.
//   - For Calloc, Size = N × element size; N is 0 only when Size is 0.
//     A count beyond 32 bits is recorded as N = 1 (one element of Size
//     bytes: the same bytes, zeroed alike).
//   - Size is the requested size of Alloc, Calloc and Memalign, and the
//     new size of Realloc; Free has none.
//   - Label is 0 for Free. For Alloc, Calloc and Memalign it may name
//     the object's label in its trace's table (see Labels); a Realloc
//     keeps the object's label when it is 0, and one other than 0 is the
//     object's label from then on (a C program's realloc called at
//     another site than the allocation: see stack.go).
//
// What is not checked, because it is the trace's content rather than its
// form: whether a Free or Realloc names a live object, and whether an
// allocation reuses the ID of a live one. A replayer counts those as trace
// errors (see the package documentation for what importers emit).
type Event struct {
	Op Op
	// Thread is the recording thread's id, or 0 when the format has none.
	Thread uint32
	// Align is the alignment of Alloc and Memalign: 0 or a power of two.
	Align uint32
	// N is the element count of Calloc.
	N uint32
	// Label is the label of the object that Alloc, Calloc or Memalign
	// starts (for a Go trace, its type), or that a Realloc gives it: a
	// number in the trace's label table, or 0 for none.
	Label uint32
	// ID names the object. Importers number objects 1, 2, 3... in order
	// of birth; the native format keeps whatever IDs it was given, and an
	// ID may be used again once its object is freed.
	ID uint64
	// Size is the requested size in bytes (for Calloc, of all elements).
	Size uint64
}

// The layout promise of the doc comment: Event is 40 bytes.
var _ [40 - unsafe.Sizeof(Event{})]byte
var _ [unsafe.Sizeof(Event{}) - 40]byte

// String formats e as the native text line that carries it, e.g.
// "a 7 100" or "m 3 64 4096".
func (e Event) String() string {
	return string(appendEvent(nil, e))
}

// EventWriter takes events one by one: a *Writer, or whatever a replayer
// feeds from them (package gen's generators write to one).
type EventWriter interface {
	Write(Event) error
}

// check reports what is wrong with e's form, or "".
func (e Event) check() string {
	switch {
	case !e.Op.Valid():
		return fmt.Sprintf("invalid op %d", uint8(e.Op))
	case e.Align&(e.Align-1) != 0:
		return fmt.Sprintf("alignment %d is not a power of two", e.Align)
	case e.Op == Calloc && e.N != 0 && e.Size%uint64(e.N) != 0:
		return fmt.Sprintf("calloc size %d is not a multiple of the count %d", e.Size, e.N)
	case e.Label != 0 && e.Op == Free:
		return fmt.Sprintf("a %v carries no label (label %d)", e.Op, e.Label)
	}
	return ""
}

// callocEvent builds the Calloc of n elements of size bytes, normalized as
// Event documents; ok is false when n × size overflows 64 bits.
func callocEvent(id, n, size uint64) (e Event, ok bool) {
	hi, total := bits.Mul64(n, size)
	if hi != 0 {
		return Event{}, false
	}
	e = Event{Op: Calloc, ID: id, Size: total, N: uint32(n)}
	if n > 1<<32-1 {
		e.N = 1
	}
	return e, true
}

// roundAlign rounds an alignment recorded by a program up to a power of
// two, as glibc's memalign does; ok is false past 1<<31.
func roundAlign(a uint64) (uint32, bool) {
	if a > 1<<31 {
		return 0, false
	}
	if a&(a-1) != 0 {
		a = 1 << bits.Len64(a)
	}
	return uint32(a), true
}
