//go:build !linux

package mem

import (
	"os"
	"unsafe"
)

// PageSize returns the OS page size.
func PageSize() int { return os.Getpagesize() }

// sysReserve backs the region with Go heap memory, page-aligned as a
// mapping would be: without the OS's reserve and commit, the whole range is
// usable and counts as resident.
func sysReserve(size int) ([]byte, error) {
	ps := PageSize()
	b := make([]byte, size+ps)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & uintptr(ps-1))
	return b[off : off+size : off+size], nil
}

func sysCommit([]byte) error { return nil }

// sysDecommit zeroes the bytes so they read as zero when committed again,
// as they would after MADV_DONTNEED.
func sysDecommit(b []byte) error {
	clear(b)
	return nil
}

func sysRelease([]byte) error { return nil }

// resident reports the committed bytes of [lo, hi): without mincore, the
// best estimate is that everything committed was touched.
func (r *Region) resident(lo, hi int) (int, error) {
	n := 0
	ps := PageSize()
	for off := lo; off < hi; off += ps {
		if r.IsCommitted(off, 1) {
			n += ps
		}
	}
	return n, nil
}

// Resident is not measurable on this platform.
func Resident(b []byte) (int, error) { return 0, ErrUnsupported }

// RSS is not measurable on this platform.
func RSS() (int64, error) { return 0, ErrUnsupported }

// ProcessRSS returns the resident set size of the process pid; this
// platform does not say.
func ProcessRSS(pid int) (int64, error) { return 0, ErrUnsupported }

// AnonRSS is not measurable on this platform.
func AnonRSS() (int64, error) { return 0, ErrUnsupported }

// AnonPSS is not measurable on this platform.
func AnonPSS() (int64, error) { return 0, ErrUnsupported }

// PeakRSS is not measurable on this platform.
func PeakRSS() (int64, error) { return 0, ErrUnsupported }

// ResetPeakRSS is not available on this platform.
func ResetPeakRSS() error { return ErrUnsupported }

// Physical returns the bytes of physical memory the machine has; this
// platform does not say.
func Physical() (int64, error) { return 0, ErrUnsupported }
