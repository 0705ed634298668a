package heaptest

import (
	"slices"
	"testing"
)

// Block is what a Model knows of a live block.
type Block struct {
	B      []byte  // the slice the heap handed out
	Usable int     // its UsableSize
	Lo, Hi uintptr // the bytes it occupies, its header included
	ID     int     // whose pattern fills it
}

// Model is the reference model of the differential tests of fit and heap:
// a map from each live block's address to its extent and the id whose
// pattern fills it, the addresses sorted, the last freed ones (for double
// frees), and the sum of the live blocks' lengths. Its methods fail the
// test when the heap breaks what the model knows: blocks overlap, or lose
// the bytes written into them.
type Model struct {
	t      testing.TB
	live   map[uintptr]*Block
	addrs  []uintptr // the live blocks' addresses, sorted
	freed  []uintptr // recently freed addresses, at most 16
	bytes  int64
	nextID int
}

// NewModel returns an empty model failing t.
func NewModel(t testing.TB) *Model {
	return &Model{t: t, live: map[uintptr]*Block{}}
}

// Addrs returns the live blocks' addresses in increasing order. The slice
// is the model's: the next Add or Drop changes it.
func (m *Model) Addrs() []uintptr { return m.addrs }

// Freed returns recently freed addresses, the oldest first.
func (m *Model) Freed() []uintptr { return m.freed }

// Live returns the live block at a, or nil.
func (m *Model) Live(a uintptr) *Block { return m.live[a] }

// Blocks returns the number of live blocks.
func (m *Model) Blocks() int { return len(m.live) }

// Bytes returns the sum of the live blocks' lengths: what the heap's Live
// must say.
func (m *Model) Bytes() int64 { return m.bytes }

// Add checks that the new block b, of usable bytes, occupying [lo, hi),
// overlaps no live block, fills it with a fresh pattern and records it;
// op names the call that returned it.
func (m *Model) Add(b []byte, usable int, lo, hi uintptr, op string) {
	t := m.t
	t.Helper()
	a := Addr(b)
	pos, found := slices.BinarySearch(m.addrs, a)
	if found {
		t.Fatalf("%s(%d) = %#x, a live block's address", op, len(b), a)
	}
	if pos > 0 {
		if p := m.live[m.addrs[pos-1]]; p.Hi > lo {
			t.Fatalf("%s(%d) = [%#x, %#x), which overlaps the live block at %#x", op, len(b), lo, hi, m.addrs[pos-1])
		}
	}
	if pos < len(m.addrs) {
		if n := m.live[m.addrs[pos]]; hi > n.Lo {
			t.Fatalf("%s(%d) = [%#x, %#x), which overlaps the live block at %#x", op, len(b), lo, hi, m.addrs[pos])
		}
	}
	m.addrs = slices.Insert(m.addrs, pos, a)
	Fill(b, m.nextID)
	m.live[a] = &Block{B: b, Usable: usable, Lo: lo, Hi: hi, ID: m.nextID}
	m.nextID++
	m.bytes += int64(len(b))
}

// Drop checks that the first keep bytes of the live block at a kept their
// pattern and forgets the block.
func (m *Model) Drop(a uintptr, keep int) *Block {
	m.t.Helper()
	x := m.live[a]
	if i := Intact(x.B[:keep], x.ID); i >= 0 {
		m.t.Fatalf("block %#x (id %d): byte %d = %#x, want %#x", a, x.ID, i, x.B[i], Pattern(x.ID, i))
	}
	delete(m.live, a)
	pos, _ := slices.BinarySearch(m.addrs, a)
	m.addrs = slices.Delete(m.addrs, pos, pos+1)
	m.bytes -= int64(len(x.B))
	return x
}

// Forget records a as freed: a later probe may hand it to Free again.
func (m *Model) Forget(a uintptr) {
	if len(m.freed) == 16 {
		m.freed = m.freed[1:]
	}
	m.freed = append(m.freed, a)
}

// Covering returns the live block whose extent holds address a, if any.
func (m *Model) Covering(a uintptr) *Block {
	pos, _ := slices.BinarySearch(m.addrs, a+1)
	for _, i := range []int{pos - 1, pos} {
		if i >= 0 && i < len(m.addrs) {
			if x := m.live[m.addrs[i]]; x != nil && a >= x.Lo && a < x.Hi {
				return x
			}
		}
	}
	return nil
}

// VerifyBytes checks every live block's bytes: all of them in blocks up
// to 4 KiB, the first and the last KiB of larger ones, so that an input
// cannot spend minutes rereading a full heap (Drop checks every byte of
// the blocks it takes).
func (m *Model) VerifyBytes() {
	for _, a := range m.addrs {
		x := m.live[a]
		i := -1
		if n := len(x.B); n <= 4096 {
			i = Intact(x.B, x.ID)
		} else if i = Intact(x.B[:1024], x.ID); i < 0 {
			for j := n - 1024; j < n && i < 0; j++ {
				if x.B[j] != Pattern(x.ID, j) {
					i = j
				}
			}
		}
		if i >= 0 {
			m.t.Fatalf("block %#x (id %d): byte %d = %#x, want %#x", a, x.ID, i, x.B[i], Pattern(x.ID, i))
		}
	}
}

// Reallocated checks the block b that Realloc returned for the live block
// at a: the first min(old length, len(b)) bytes kept the block's pattern.
// It forgets the old block, and records a as freed if the block moved;
// the caller then Adds b.
func (m *Model) Reallocated(a uintptr, b []byte, op string) {
	m.t.Helper()
	m.ReallocatedKeeping(a, b, len(m.live[a].B), op)
}

// ReallocatedKeeping is Reallocated for a Realloc given a slice of the
// block cut to keep bytes: only the first min(keep, len(b)) must have kept
// the pattern.
func (m *Model) ReallocatedKeeping(a uintptr, b []byte, keep int, op string) {
	m.t.Helper()
	x := m.Drop(a, 0)
	if i := Intact(b[:min(keep, len(x.B), len(b))], x.ID); i >= 0 {
		m.t.Fatalf("%s(%#x, %d) = %#x: byte %d = %#x, want %#x kept", op, a, len(b), Addr(b), i, b[i], Pattern(x.ID, i))
	}
	if Addr(b) != a {
		m.Forget(a)
	}
}

// Free frees the live block at a with h's Free, which must succeed, once
// Drop has checked all its bytes, and records a as freed.
func (m *Model) Free(h interface{ Free(b []byte) error }, a uintptr) {
	m.t.Helper()
	m.FreeCut(h, a, func(b []byte) []byte { return b })
}

// FreeCut is Free through cut(b), b being the block's slice: a slice of
// the block that starts where it does but may be shorter, for a heap
// that accounts a freed block by the block, whatever the slice's length
// (the model drops the block's whole length).
func (m *Model) FreeCut(h interface{ Free(b []byte) error }, a uintptr, cut func([]byte) []byte) {
	m.t.Helper()
	x := m.Drop(a, len(m.live[a].B))
	c := cut(x.B)
	if err := h.Free(c); err != nil {
		m.t.Fatalf("Free(%#x, len %d cap %d of the block's %d) = %v, want nil", a, len(c), cap(c), len(x.B), err)
	}
	m.Forget(a)
}
