//go:build linux

package mem

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

var pageSize = sync.OnceValue(unix.Getpagesize)

// PageSize returns the OS page size.
func PageSize() int { return pageSize() }

// sysReserve maps size bytes with no access. MAP_NORESERVE keeps the
// reservation out of the overcommit accounting until pages are committed.
func sysReserve(size int) ([]byte, error) {
	return unix.Mmap(-1, 0, size, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
}

func sysCommit(b []byte) error {
	return unix.Mprotect(b, unix.PROT_READ|unix.PROT_WRITE)
}

// sysDecommit drops the pages (MADV_DONTNEED: RSS falls at once and the
// pages read as zero later; MADV_FREE would leave RSS untouched until the
// kernel is short of memory) and takes away access, so a use after
// decommit faults instead of reading zeros silently.
func sysDecommit(b []byte) error {
	if err := unix.Madvise(b, unix.MADV_DONTNEED); err != nil {
		return err
	}
	return unix.Mprotect(b, unix.PROT_NONE)
}

func sysRelease(b []byte) error { return unix.Munmap(b) }

func (r *Region) resident(lo, hi int) (int, error) {
	return Resident(r.raw[lo:hi])
}

// Resident returns how many bytes of the pages that b spans are in
// physical memory. b may be any memory, the Go heap's included; its pages
// are counted whole.
func Resident(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	ps := PageSize()
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	pages := (int(addr&uintptr(ps-1)) + len(b) + ps - 1) / ps
	vec := make([]byte, pages)
	// The address is rounded down to its page, which may lie before b, so
	// it cannot be a slice; mincore only reads the page tables. The
	// conversions stay inside the call so b and vec are kept alive.
	_, _, errno := unix.Syscall(unix.SYS_MINCORE,
		uintptr(unsafe.Pointer(unsafe.SliceData(b)))&^uintptr(ps-1),
		uintptr(pages*ps), uintptr(unsafe.Pointer(unsafe.SliceData(vec))))
	if errno != 0 {
		return 0, errno
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n * ps, nil
}

// RSS returns the process's resident set size in bytes (from
// /proc/self/statm, which the kernel may update a little late).
func RSS() (int64, error) { return statmRSS("/proc/self/statm") }

// ProcessRSS returns the resident set size in bytes of the process pid
// (another process of the same user, say a child).
func ProcessRSS(pid int) (int64, error) {
	return statmRSS("/proc/" + strconv.Itoa(pid) + "/statm")
}

func statmRSS(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, fmt.Errorf("mem: %s: want at least 2 fields, got %q", path, b)
	}
	pages, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("mem: %s: resident field: %w", path, err)
	}
	return pages * int64(PageSize()), nil
}

// AnonRSS returns the process's anonymous resident memory in bytes: the
// RSS less the pages backed by files (the program's text, shared
// libraries) and shared memory, which an allocator does not own. It is
// statm's resident less its shared field, RssAnon of /proc/self/status.
func AnonRSS() (int64, error) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, err
	}
	f := bytes.Fields(b)
	if len(f) < 3 {
		return 0, fmt.Errorf("mem: /proc/self/statm: want at least 3 fields, got %q", b)
	}
	res, err1 := strconv.ParseInt(string(f[1]), 10, 64)
	shared, err2 := strconv.ParseInt(string(f[2]), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("mem: /proc/self/statm: %w", err)
	}
	return (res - shared) * int64(PageSize()), nil
}

// AnonPSS returns the process's anonymous and shared-memory proportional
// set size in bytes (Pss_Anon + Pss_Shmem of /proc/self/smaps_rollup):
// a page counts once however many of the process's pages map it, as
// AnonRSS does not, which leaves shared memory out and whose kernel
// counters count a page once per mapping. It walks the process's page
// tables, so it costs more than AnonRSS: a sample's, not an event's. The
// kernel keeps no peak of it.
func AnonPSS() (int64, error) {
	b, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		return 0, err
	}
	var kb int64
	found := 0
	for _, line := range bytes.Split(b, []byte("\n")) {
		name, rest, ok := bytes.Cut(line, []byte(":"))
		if !ok || (string(name) != "Pss_Anon" && string(name) != "Pss_Shmem") {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, fmt.Errorf("mem: /proc/self/smaps_rollup: %s: want a number of kB, got %q", name, rest)
		}
		n, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("mem: /proc/self/smaps_rollup: %s: %w", name, err)
		}
		kb += n
		found++
	}
	if found != 2 {
		return 0, fmt.Errorf("mem: /proc/self/smaps_rollup has no Pss_Anon and Pss_Shmem (Linux 5.10 or later has them)")
	}
	return kb << 10, nil
}

// PeakRSS returns the highest RSS of the process so far, or since the last
// [ResetPeakRSS] (VmHWM in /proc/self/status).
func PeakRSS() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := s.Bytes()
		if v, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			kb, err := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("mem: /proc/self/status: VmHWM: %w", err)
			}
			return kb << 10, nil
		}
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("mem: /proc/self/status has no VmHWM line")
}

// ResetPeakRSS sets the peak RSS back to the current RSS (writes 5 to
// /proc/self/clear_refs), so a later [PeakRSS] measures from now on.
func ResetPeakRSS() error {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// Physical returns the bytes of physical memory the machine has (the
// kernel's total RAM, sysinfo(2)).
func Physical() (int64, error) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0, fmt.Errorf("mem: sysinfo: %w", err)
	}
	return int64(si.Totalram) * int64(si.Unit), nil
}
