//go:build !cgo || !linux

package libc

import "unsafe"

// Without cgo, or off Linux, there is no C allocator: the exported
// functions check available and fail with ErrUnavailable before reaching
// these, which exist so that the package builds.

const available = false

func sysProbe() (kind mallocKind, version, library string) { return unknownMalloc, "", "" }

func sysStats() (footprint, allocated int64, failed string) { return 0, 0, ErrUnavailable.Error() }

func sysMalloc(int) unsafe.Pointer { return nil }

func sysFree(unsafe.Pointer) {}

func sysUsableSize(unsafe.Pointer) int { return 0 }

// loopState is empty: NewLoop never returns a Loop here.
type loopState struct{}

func (s *loopState) init(bool) error { return ErrUnavailable }

func (s *loopState) run([]Op) (done, status int, errno error) { return 0, runOK, nil }

func (s *loopState) closed() bool { return true }

func (s *loopState) block(uint32) (unsafe.Pointer, uint64) { return nil, 0 }

func (s *loopState) elapsed() int64 { return 0 }

func (s *loopState) offCPU() int64 { return 0 }

func (s *loopState) tableBytes() int64 { return 0 }

func (s *loopState) close() {}
