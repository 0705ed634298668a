//go:build cgo && linux

package cloop

// The plain loop is in loop.c. It neither keeps its pointers nor calls
// back into Go (the noescape and nocallback directives).

/*
#cgo noescape carve_cloop_run
#cgo nocallback carve_cloop_run
#include "cloop.h"
*/
import "C"

import (
	"unsafe"

	"github.com/carvelab/carve/lab/libc"
)

// libc.Op and carve_cloop_op share their layout (each line fails to
// compile if they differ).
var (
	_ = [1]int{}[unsafe.Sizeof(libc.Op{})-C.sizeof_struct_carve_cloop_op]
	_ = [1]int{}[unsafe.Offsetof(libc.Op{}.Align)-unsafe.Offsetof(C.struct_carve_cloop_op{}.align)]
	_ = [1]int{}[unsafe.Offsetof(libc.Op{}.Slot)-unsafe.Offsetof(C.struct_carve_cloop_op{}.slot)]
	_ = [1]int{}[unsafe.Offsetof(libc.Op{}.Size)-unsafe.Offsetof(C.struct_carve_cloop_op{}.size)]
	_ = [1]int{}[runNoMemory-C.CARVE_CLOOP_NOMEM]
	_ = [1]int{}[runMap-C.CARVE_CLOOP_MAP]
)

// run hands ops to C in place: libc.Op holds no Go pointer, so cgo allows
// it, and the layouts match (asserted above).
func run(ops []libc.Op, slots int) (done, status int) {
	var n C.size_t
	p := (*C.struct_carve_cloop_op)(unsafe.Pointer(unsafe.SliceData(ops)))
	st := C.carve_cloop_run(p, C.size_t(len(ops)), C.size_t(slots), &n)
	return int(n), int(st)
}
