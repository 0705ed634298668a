package heaptest

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/carvelab/carve/internal/invariants"
)

// Addr returns the address of the first byte of b.
func Addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// At returns n bytes starting delta bytes from the start of c. Tests use
// it only to build slices for Free to refuse: the memory is never touched.
func At(c []byte, delta, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(c)), delta)), n)
}

// Pattern is the byte a test writes at index i of the block of object id.
// It repeats every 256 bytes, so Fill and Intact work a period at a time.
func Pattern(id, i int) byte { return byte(id*131 + i*7 + 1) }

// period returns object id's pattern for one period.
func period(id int) (row [256]byte) {
	for i := range row {
		row[i] = Pattern(id, i)
	}
	return row
}

// Fill writes object id's pattern into b.
func Fill(b []byte, id int) {
	row := period(id)
	for i := 0; i < len(b); i += len(row) {
		copy(b[i:], row[:])
	}
}

// Intact returns the index of the first byte of b that lost object id's
// pattern, or -1.
func Intact(b []byte, id int) int {
	row := period(id)
	for i := 0; i < len(b); i += len(row) {
		part := b[i:min(i+len(row), len(b))]
		if bytes.Equal(part, row[:len(part)]) {
			continue
		}
		for j := range part {
			if part[j] != row[j] {
				return i + j
			}
		}
	}
	return -1
}

// LogUniform returns n sizes drawn log-uniformly from [lo, hi], from a
// fixed seed.
func LogUniform(n, lo, hi int, seed uint64) []int {
	r := rand.New(rand.NewPCG(seed, 99))
	s := make([]int, n)
	for i := range s {
		s[i] = int(math.Exp(math.Log(float64(lo)) + r.Float64()*(math.Log(float64(hi))-math.Log(float64(lo)))))
	}
	return s
}

// Poisoned returns the index of the first byte of b that is not
// invariants.Poison, or -1: what a checked build's freed memory must read.
func Poisoned(b []byte) int {
	for i, c := range b {
		if c != invariants.Poison {
			return i
		}
	}
	return -1
}

// MustPanic runs f and fails the test unless it panics with a message
// containing want.
func MustPanic(t testing.TB, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil || !strings.Contains(fmt.Sprint(r), want) {
			t.Fatalf("panic = %v, want one saying %q", r, want)
		}
	}()
	f()
}

// CheckSlice fails the test unless b, returned by call for a request of
// size bytes, is not nil, has len == cap == size, and is aligned to align.
func CheckSlice(t testing.TB, b []byte, size, align int, call string) {
	t.Helper()
	if len(b) != size || cap(b) != size || b == nil {
		t.Fatalf("%s = len %d cap %d, want len == cap == %d, not nil", call, len(b), cap(b), size)
	}
	if Addr(b)%uintptr(align) != 0 {
		t.Fatalf("%s = %#x, not aligned to %d", call, Addr(b), align)
	}
}
