// Package heaptest holds what the tests of carve's allocators share: the
// helpers every such test needs (Addr, At, the byte patterns written into
// blocks, LogUniform sizes, Poisoned, MustPanic), used by the tests of
// pool, lockfree, arena, fit, buddy, sizeclass and heap; RunOps, which
// drives a heap with operations decoded from bytes, for the map tests of
// fit and buddy; and Run, Ops and Model, the differential tests of fit and
// heap (the decoding of their fuzz inputs and the reference model they
// check the heap against). It imports testing: only _test.go files may
// import it.
package heaptest

import "testing"

// Heap is what RunOps calls.
type Heap interface {
	Alloc(size, align int) ([]byte, error)
	Free(b []byte) error
	Realloc(b []byte, size int) ([]byte, error)
	Trim() (int64, error)
}

// RunOps decodes one call from each byte of ops and makes it on h, then
// calls check with the blocks live after it:
//
//	0x00-0x7f  Alloc of op*8 bytes (op<<9 when op is a multiple of 7),
//	           aligned to 1<<(op%8*2%13); a refusal is not an error
//	0x80-0xdf  Free of live block op % live (when one is live)
//	0xe0-0xf7  Realloc of live block op % live to (op-0xe0)*48 bytes
//	otherwise  Trim
//
// A Free or Trim that fails ends the test.
func RunOps(t testing.TB, h Heap, ops []byte, check func(live [][]byte)) {
	t.Helper()
	var live [][]byte
	for i, op := range ops {
		switch {
		case op < 0x80: // Alloc: small sizes mostly, some large
			size := int(op) * 8
			if op%7 == 0 {
				size = int(op) << 9
			}
			if b, err := h.Alloc(size, 1<<(op%8*2%13)); err == nil {
				live = append(live, b)
			}
		case op < 0xe0 && len(live) > 0: // Free
			j := int(op) % len(live)
			if err := h.Free(live[j]); err != nil {
				t.Fatalf("op %d: Free = %v", i, err)
			}
			live[j] = live[len(live)-1]
			live = live[:len(live)-1]
		case op < 0xf8 && len(live) > 0: // Realloc
			j := int(op) % len(live)
			if b, err := h.Realloc(live[j], int(op-0xe0)*48); err == nil {
				live[j] = b
			}
		default:
			if _, err := h.Trim(); err != nil {
				t.Fatalf("op %d: Trim = %v", i, err)
			}
		}
		check(live)
	}
}

// Container is a heap that says whether memory is its own.
type Container interface {
	Contains(b []byte) bool
	Close() error
}

// ContainsUntilClose checks that h contains b, a block it handed out,
// and not Go memory; then closes h and checks that it no longer contains
// b.
func ContainsUntilClose(t testing.TB, h Container, b []byte) {
	t.Helper()
	if !h.Contains(b) || h.Contains(make([]byte, 8)) {
		t.Errorf("Contains(block) = %v, Contains(Go memory) = %v; want true, false", h.Contains(b), h.Contains(make([]byte, 8)))
	}
	h.Close()
	if h.Contains(b) {
		t.Error("Contains after Close = true")
	}
}
