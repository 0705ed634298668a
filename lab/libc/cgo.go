//go:build cgo && linux

package libc

// Every call into C is in this file. The C side is probe.c (which malloc,
// its statistics) and loop.c (the batch loop), declared in carve_libc.h.
// dlsym and dladdr live in libdl before glibc 2.34, hence -ldl.
// carve_libc_run neither keeps its pointers nor calls back into Go, which
// the noescape and nocallback directives let cgo rely on.

/*
#cgo LDFLAGS: -ldl
#cgo noescape carve_libc_run
#cgo nocallback carve_libc_run
#include <stdlib.h>
#include <malloc.h>
#include "carve_libc.h"
*/
import "C"

import (
	"syscall"
	"unsafe"
)

const available = true

// The rule loop.c times the calls by (clock_test.go checks that it is
// package replay's).
const (
	checkAfterNs = C.CARVE_LIBC_CHECK_AFTER_NS
	longCallNs   = C.CARVE_LIBC_LONG_CALL_NS
)

// The Go side of the C layouts and enums (each line fails to compile if
// the two differ).
var (
	_ = [1]int{}[unsafe.Sizeof(Op{})-C.sizeof_struct_carve_libc_op]
	_ = [1]int{}[unsafe.Offsetof(Op{}.Align)-unsafe.Offsetof(C.struct_carve_libc_op{}.align)]
	_ = [1]int{}[unsafe.Offsetof(Op{}.Slot)-unsafe.Offsetof(C.struct_carve_libc_op{}.slot)]
	_ = [1]int{}[unsafe.Offsetof(Op{}.Size)-unsafe.Offsetof(C.struct_carve_libc_op{}.size)]

	_ = [1]int{}[OpMalloc-C.CARVE_LIBC_OP_MALLOC]
	_ = [1]int{}[OpCalloc-C.CARVE_LIBC_OP_CALLOC]
	_ = [1]int{}[OpMemalign-C.CARVE_LIBC_OP_MEMALIGN]
	_ = [1]int{}[OpRealloc-C.CARVE_LIBC_OP_REALLOC]
	_ = [1]int{}[OpFree-C.CARVE_LIBC_OP_FREE]

	_ = [1]int{}[runNoMemory-C.CARVE_LIBC_NOMEM]
	_ = [1]int{}[runKind-C.CARVE_LIBC_KIND]
	_ = [1]int{}[runAlign-C.CARVE_LIBC_ALIGN]
	_ = [1]int{}[runInUse-C.CARVE_LIBC_INUSE]
	_ = [1]int{}[runTable-C.CARVE_LIBC_TABLE]

	_ = [1]int{}[int(unknownMalloc)-C.CARVE_LIBC_UNKNOWN]
	_ = [1]int{}[int(glibcMalloc)-C.CARVE_LIBC_GLIBC]
	_ = [1]int{}[int(jemallocMalloc)-C.CARVE_LIBC_JEMALLOC]
	_ = [1]int{}[int(tcmallocMalloc)-C.CARVE_LIBC_TCMALLOC]
	_ = [1]int{}[int(mimallocMalloc)-C.CARVE_LIBC_MIMALLOC]
)

func sysProbe() (kind mallocKind, version, library string) {
	var id C.struct_carve_libc_identity
	C.carve_libc_probe(&id)
	return mallocKind(id.kind), C.GoString(&id.version[0]), C.GoString(&id.library[0])
}

// sysStats returns the probed malloc's figures, or what failed.
func sysStats() (footprint, allocated int64, failed string) {
	var s C.struct_carve_libc_stats
	if C.carve_libc_heap_stats(&s) != 0 {
		return 0, 0, C.GoString(s.failed)
	}
	return int64(s.footprint), int64(s.allocated), ""
}

// sysMalloc is malloc, not cgo's C.malloc, which aborts the process when
// malloc returns NULL.
func sysMalloc(size int) unsafe.Pointer { return C.carve_libc_malloc(C.size_t(size)) }

func sysFree(p unsafe.Pointer) { C.free(p) }

func sysUsableSize(p unsafe.Pointer) int { return int(C.malloc_usable_size(p)) }

// loopState is a Loop's C state. It holds no Go pointer (its table is
// mmap'd), so C may be handed its address.
type loopState struct {
	c C.struct_carve_libc_loop
}

func (s *loopState) init(touch bool) error {
	t := C.int(0)
	if touch {
		t = 1
	}
	if C.carve_libc_loop_init(&s.c, t) != 0 {
		return syscall.Errno(s.c.err)
	}
	return nil
}

// run performs ops in one C call. ops holds no Go pointer (Op is plain
// numbers), so cgo lets C read the slice in place, through a pointer to
// the C struct of the same layout (asserted above).
func (s *loopState) run(ops []Op) (done, status int, errno error) {
	p := (*C.struct_carve_libc_op)(unsafe.Pointer(unsafe.SliceData(ops)))
	st := C.carve_libc_run(&s.c, p, C.size_t(len(ops)))
	if s.c.err != 0 {
		errno = syscall.Errno(s.c.err)
	}
	return int(s.c.done), int(st), errno
}

func (s *loopState) closed() bool { return s.c.table == nil }

// block reads a table entry in place: the table is C memory that only C
// calls on this loop change, and none is running (a Loop is not for
// concurrent use).
func (s *loopState) block(slot uint32) (unsafe.Pointer, uint64) {
	if uint64(slot) >= uint64(s.c.cap) {
		return nil, 0
	}
	e := unsafe.Slice(s.c.table, s.c.cap)[slot]
	return e.p, uint64(e.size)
}

func (s *loopState) elapsed() int64 { return int64(s.c.ns) }

func (s *loopState) offCPU() int64 { return int64(s.c.off) }

func (s *loopState) tableBytes() int64 { return int64(s.c.hi) * C.sizeof_struct_carve_libc_slot }

func (s *loopState) close() { C.carve_libc_loop_close(&s.c) }
