package trace

import (
	"math/rand/v2"
	"testing"
)

// check verifies the invariants of both tables.
func (m *addrMap) check() string {
	if m.isWide {
		return m.wide.check()
	}
	return m.narrow.check()
}

// check verifies the table's invariants: the count, the load bound, and
// that every key is reachable from its home slot without crossing an
// empty slot.
func (t *table[K]) check() string {
	n := 0
	for i, s := range t.slots {
		if s.key == 0 {
			continue
		}
		n++
		for j := t.home(s.key); j != uint64(i); j = (j + 1) & t.mask {
			if t.slots[j].key == 0 {
				return "a key lies past an empty slot from its home"
			}
		}
	}
	switch {
	case n != t.count:
		return "count is wrong"
	case len(t.slots) > 0 && 2*t.count >= len(t.slots):
		return "table more than half full"
	}
	return ""
}

// TestAddrMap runs random puts and deletes against a Go map, with
// addresses drawn from a few dense regions (as allocators hand them out)
// so that runs form and deletions must shift entries back.
//
// The first half of the operations use 32-bit addresses (the narrow
// table), the second half 64-bit ones too (the table widens).
func TestAddrMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var m addrMap
	ref := map[uint64]uint64{}
	const ops = 200000
	for i := range ops {
		k := uint64(1+rng.IntN(4))<<28 | uint64(rng.IntN(1<<14))<<4
		if i >= ops/2 && rng.IntN(2) == 0 {
			k <<= 8
		}
		if i == ops/2 && m.isWide {
			t.Fatal("the table is wide before any 64-bit address")
		}
		switch rng.IntN(3) {
		case 0, 1:
			old, replaced := m.put(k, uint64(i))
			want, ok := ref[k]
			if replaced != ok || old != want {
				t.Fatalf("put(%#x) = %d, %v, want %d, %v", k, old, replaced, want, ok)
			}
			ref[k] = uint64(i)
		case 2:
			v, ok := m.del(k)
			want, wok := ref[k]
			if ok != wok || v != want {
				t.Fatalf("del(%#x) = %d, %v, want %d, %v", k, v, ok, want, wok)
			}
			delete(ref, k)
		}
		if i%10000 == 0 {
			if msg := m.check(); msg != "" {
				t.Fatalf("after %d operations: %s", i, msg)
			}
		}
	}
	if !m.isWide {
		t.Fatal("the table is narrow after 64-bit addresses")
	}
	if m.len() != len(ref) {
		t.Fatalf("len %d, want %d", m.len(), len(ref))
	}
	for k, v := range ref {
		if got, ok := m.get(k); !ok || got != v {
			t.Fatalf("get(%#x) = %d, %v, want %d", k, got, ok, v)
		}
	}
	if msg := m.check(); msg != "" {
		t.Fatal(msg)
	}
	var empty addrMap
	if _, ok := empty.get(1); ok {
		t.Error("get on an empty table found a key")
	}
	if _, ok := empty.del(1); ok {
		t.Error("del on an empty table found a key")
	}
}
