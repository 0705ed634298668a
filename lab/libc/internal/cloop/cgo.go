//go:build cgo && linux

package cloop

// The plain loop is in loop.c. It neither keeps its pointers nor calls
// back into Go (the noescape and nocallback directives).

/*
#cgo noescape carve_cloop_run
#cgo nocallback carve_cloop_run
#cgo noescape carve_cloop_pairs
#cgo nocallback carve_cloop_pairs
#cgo noescape carve_cloop_window
#cgo nocallback carve_cloop_window
#include <stdlib.h>
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

// pairs makes n pairs of malloc(size) and free in C.
func pairs(n, size int) int {
	return int(C.carve_cloop_pairs(C.size_t(n), C.size_t(size)))
}

// window is carve_cloop_window over w's ring and sizes.
func (w *Window) run(from, n int) int {
	return int(C.carve_cloop_window((*unsafe.Pointer)(unsafe.Pointer(w.ring)), C.size_t(w.live),
		(*C.int32_t)(unsafe.Pointer(unsafe.SliceData(w.sizes))), C.size_t(len(w.sizes)), C.size_t(from), C.size_t(n)))
}

// newRing returns a ring of live block pointers in C memory (a Go slice
// may not hold C's pointers across calls as Go pointers), all NULL.
func newRing(live int) (unsafe.Pointer, error) {
	p := C.calloc(C.size_t(live), C.size_t(unsafe.Sizeof(uintptr(0))))
	if p == nil {
		return nil, libc.ErrNoMemory
	}
	return p, nil
}

// freeRing frees the ring's blocks and the ring.
func freeRing(ring unsafe.Pointer, live int) {
	blocks := unsafe.Slice((*unsafe.Pointer)(ring), live)
	for _, b := range blocks {
		C.free(b)
	}
	C.free(ring)
}
