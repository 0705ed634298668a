package libc

import (
	"fmt"
	"unsafe"

	"github.com/carvelab/carve/lab/trace"
)

// Op is one operation of a batch for [Loop.Run]. It is read by C in
// place, so its layout is fixed: 24 bytes in the machine's byte order,
//
//	offset  0  Kind   uint8   (then 3 bytes of padding)
//	offset  4  Align  uint32
//	offset  8  Slot   uint32  (then 4 bytes of padding)
//	offset 16  Size   uint64
//
// and it holds no Go pointer, so a []Op may be passed to C.
type Op struct {
	// Kind is what to do: OpMalloc, OpCalloc, OpMemalign, OpRealloc or
	// OpFree.
	Kind uint8
	_    [3]byte
	// Align is the alignment of OpMemalign, a power of two; values below
	// the size of a pointer, 0 included, are raised to it. Other kinds
	// ignore it.
	Align uint32
	// Slot names the block: an index into the loop's table, which grows to
	// hold the largest slot used. The caller numbers blocks densely from 0
	// and reuses the slots of freed blocks, so the table stays small.
	Slot uint32
	_    uint32
	// Size is the requested size in bytes (the new size for OpRealloc; 0
	// is allowed). OpFree ignores it.
	Size uint64
}

// The op kinds. The zero Kind is not an op: Run refuses it.
const (
	// OpMalloc is malloc(Size) into an empty slot.
	OpMalloc = iota + 1
	// OpCalloc is calloc(1, Size) into an empty slot: the block reads as
	// zero, and stays zero however the loop touches it.
	OpCalloc
	// OpMemalign is posix_memalign(&p, Align, Size) into an empty slot.
	OpMemalign
	// OpRealloc is realloc of the slot's block to Size bytes, keeping its
	// contents up to the smaller size; of NULL, a malloc, when the slot is
	// empty.
	OpRealloc
	// OpFree is free of the slot's block; the slot becomes empty. Freeing
	// an empty slot does nothing.
	OpFree
)

// The layout promise of Op's doc comment (the C side asserts the same).
var (
	_ = [1]int{}[unsafe.Sizeof(Op{})-24]
	_ = [1]int{}[unsafe.Offsetof(Op{}.Align)-4]
	_ = [1]int{}[unsafe.Offsetof(Op{}.Slot)-8]
	_ = [1]int{}[unsafe.Offsetof(Op{}.Size)-16]
)

var kindNames = [...]string{"", "malloc", "calloc", "memalign", "realloc", "free"}

// kindName returns the C call an op kind makes, or "kind N".
func kindName(k uint8) string {
	if k == 0 || int(k) >= len(kindNames) {
		return fmt.Sprintf("kind %d", k)
	}
	return kindNames[k]
}

// mallocAlign is the alignment malloc guarantees on 64-bit platforms: an
// allocation asking no more is a malloc, one asking more a memalign.
const mallocAlign = 16

// OpOf returns the op that performs trace event e on slot: OpMalloc, or
// OpMemalign when e asks for more alignment than malloc gives; OpCalloc;
// OpMemalign; OpRealloc; OpFree. ok is false for an event that is not an
// allocator call.
func OpOf(e trace.Event, slot uint32) (op Op, ok bool) {
	op = Op{Slot: slot, Size: e.Size, Align: e.Align}
	switch e.Op {
	case trace.Alloc:
		op.Kind = OpMalloc
		if e.Align > mallocAlign {
			op.Kind = OpMemalign
		}
	case trace.Calloc:
		op.Kind = OpCalloc
	case trace.Memalign:
		op.Kind = OpMemalign
	case trace.Realloc:
		op.Kind = OpRealloc
	case trace.Free:
		op.Kind = OpFree
	default:
		return Op{}, false
	}
	return op, true
}
