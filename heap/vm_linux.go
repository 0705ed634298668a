//go:build linux && !carvegomem

package heap

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/carvelab/carve/mem"
)

// This file holds the heap's address space on Linux: one mapping per zone,
// reserved with no access, committed from the bottom up, its free pages
// purged. It does what mem.Region does, less the Region's bitmap of one
// bit per reserved page: the heap reserves tens of GiB per zone, which
// would cost a bitmap of a MiB or more of Go memory per zone (1/32768 of
// the reservation) whatever the heap holds; a zone commits a prefix of its
// reservation, and knows which pages it purged, so it needs none.

// vm is a zone's reservation.
type vm struct {
	raw []byte // the mapping as mmap returned it (munmap wants exactly this); nil after release
	// file is 1 + the descriptor of the memory file behind a zone that
	// meshes (reserveMeshVM), 0 for an anonymous one: the reservation's
	// page i is the file's page i until a mesh maps it onto another's
	// (remap).
	file int
}

// reserveVM maps n bytes (a multiple of the page size) with no access and
// no memory behind them. MAP_NORESERVE keeps the reservation out of the
// overcommit accounting until pages are committed.
func reserveVM(n int64) (vm, error) {
	b, err := unix.Mmap(-1, 0, int(n), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return vm{}, fmt.Errorf("heap: reserve %d bytes: %w", n, err)
	}
	return vm{raw: b}, nil
}

// reserveMeshVM reserves n bytes as reserveVM does, backed by a memory
// file (memfd_create) of n bytes, sparse: a page of the file holds memory
// once written, and a hole punched in it gives the memory back. Its
// mapping is MAP_SHARED, so that remap can map one page of the
// reservation onto another's page of the file; a fork shares it with the
// child, without copy-on-write.
func reserveMeshVM(n int64) (vm, error) {
	fd, err := unix.MemfdCreate("carve-heap", unix.MFD_CLOEXEC)
	if err != nil {
		return vm{}, fmt.Errorf("heap: memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, n); err != nil {
		unix.Close(fd)
		return vm{}, fmt.Errorf("heap: size the memory file to %d bytes: %w", n, err)
	}
	b, err := unix.Mmap(fd, 0, int(n), unix.PROT_NONE, unix.MAP_SHARED|unix.MAP_NORESERVE)
	if err != nil {
		unix.Close(fd)
		return vm{}, fmt.Errorf("heap: reserve %d bytes of the memory file: %w", n, err)
	}
	return vm{raw: b, file: fd + 1}, nil
}

// canMesh reports whether zones can mesh here (Linux, a page the heap's).
func canMesh() bool { return canPurge() }

// remap maps the page at offset lo of the reservation onto the file's
// page at offset from, readable and writable: what was there is no longer
// seen through lo. A refused mmap leaves the mapping as it was.
func (v vm) remap(lo, from int64) error {
	_, err := unix.MmapPtr(v.file-1, from, unsafe.Pointer(&v.raw[lo]), pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_FIXED)
	return err
}

// punch gives back the memory of the file's pages [lo, hi): they read as
// zero through every page mapping them.
func (v vm) punch(lo, hi int64) error {
	return unix.Fallocate(v.file-1, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, lo, hi-lo)
}

// residentOnce is resident, counting each page of memory once: for a
// zone backed by a memory file, whose pages a meshed page and its leader
// both map (mincore counts such a page twice), the file's blocks.
func (v vm) residentOnce(lo, hi int64) (int64, error) {
	if v.file != 0 {
		return v.fileResident()
	}
	return v.resident(lo, hi)
}

// fileResident returns the bytes of memory the file holds: each page
// once, however many pages of the reservation map it.
func (v vm) fileResident() (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(v.file-1, &st); err != nil {
		return 0, err
	}
	return st.Blocks * 512, nil
}

// base returns the address of the first byte: a multiple of the page size.
func (v vm) base() unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(v.raw)) }

// commit makes [lo, hi) readable and writable; pages read as zero until
// written.
func (v vm) commit(lo, hi int64) error {
	return unix.Mprotect(v.raw[lo:hi], unix.PROT_READ|unix.PROT_WRITE)
}

// purge gives the physical pages of [lo, hi) back to the OS and keeps the
// mapping: MADV_DONTNEED, after which RSS drops at once and the pages read
// as zero when next touched, with no call to commit them again.
// (mem.Region.Decommit also takes access away with an mprotect, which
// splits the mapping: one mapping per hole, and the kernel allows 65,530
// per process.)
//
// A zone backed by a memory file punches a hole in it instead:
// MADV_DONTNEED frees no page of a shared file mapping.
func (v vm) purge(lo, hi int64) error {
	if v.file != 0 {
		return v.punch(lo, hi)
	}
	return unix.Madvise(v.raw[lo:hi], unix.MADV_DONTNEED)
}

// resident returns how many bytes of [lo, hi) are in physical memory
// (mincore).
func (v vm) resident(lo, hi int64) (int64, error) {
	n, err := mem.Resident(v.raw[lo:hi])
	return int64(n), err
}

// residentPages returns, for each page of [lo, hi), whether it is in
// physical memory (mincore's vector: bit 0 of each byte).
func (v vm) residentPages(lo, hi int64) ([]byte, error) {
	vec := make([]byte, (hi-lo)/pageSize)
	if len(vec) == 0 {
		return vec, nil
	}
	// The range starts on a page, so it can be handed to mincore as it is;
	// the conversions stay inside the call so the slices are kept alive.
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&v.raw[lo])), uintptr(hi-lo), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return nil, errno
	}
	return vec, nil
}

// contains reports whether the bytes of b, up to its capacity, lie wholly
// inside the reservation.
func (v vm) contains(b []byte) bool {
	if v.raw == nil {
		return false
	}
	a, base := addr(b), uintptr(v.base())
	return a >= base && a-base <= uintptr(len(v.raw)) && uintptr(cap(b)) <= uintptr(len(v.raw))-(a-base)
}

// bounds returns the reservation's first address and the one past its end.
func (v vm) bounds() (lo, hi uintptr) {
	lo = uintptr(v.base())
	return lo, lo + uintptr(len(v.raw))
}

// release unmaps the reservation.
func (v *vm) release() error {
	if v.raw == nil {
		return nil
	}
	err := unix.Munmap(v.raw)
	if v.file != 0 {
		err = errors.Join(err, unix.Close(v.file-1))
		v.file = 0
	}
	v.raw = nil
	return err
}

// canPurge reports whether purge gives back the heap's pages: the OS page
// must be the heap's page.
var canPurge = sync.OnceValue(func() bool { return mem.PageSize() == pageSize })

// physicalMemory returns the machine's physical memory in bytes, or 4 GiB
// if the OS does not say.
func physicalMemory() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil || si.Totalram == 0 {
		return 4 << 30
	}
	return int64(si.Totalram) * int64(max(si.Unit, 1))
}

// reserveFactor is how many times the Limit each zone reserves, so that a
// zone whose free pages were purged still finds address space to grow
// into while its Footprint is under the Limit.
const reserveFactor = 4
