package sizeclass

// This file holds the span table, which tells Free the class of an
// address.
//
// Every class's pool reserves the same power of two of address space,
// R bytes, wherever the OS places it (page-aligned only). Cut the address
// space into granules of R bytes: a reservation covers the end of one
// granule and the start of the next (or exactly one granule), so a
// granule meets at most two reservations, one that began in an earlier
// granule and ends in it, one that begins in it. The table maps a
// granule to those two, and an address to the one whose range holds it,
// with one shift, one probe of a small hash table (granule numbers of
// reservations the OS placed side by side are consecutive, and land in
// consecutive slots) and two compares.
//
// The alternative, a sorted table of the reservations searched by
// bisection, costs log2(classes in use) dependent, unpredictable
// branches; BenchmarkClassOf in bench_test.go measures both.

// spanSlots is the size of the hash table: a power of two, more than
// twice the most granules (two per class), so that probes stay short.
const spanSlots = 256

// spanTable maps addresses to classes.
type spanTable struct {
	shift uint // log2 of the granule, the bytes each class reserves
	slots [spanSlots]spanSlot
}

// spanSlot describes one granule: [start, belowEnd) belongs to class
// below, [aboveStart, end) to class above, the rest to no class.
type spanSlot struct {
	key        uintptr // granule number + 1; 0 marks an empty slot
	belowEnd   uintptr
	aboveStart uintptr
	below      uint8
	above      uint8
}

func (t *spanTable) init(shift uint) {
	t.shift = shift
	t.clear()
}

func (t *spanTable) clear() {
	t.slots = [spanSlots]spanSlot{}
}

// lookup returns the class whose reservation holds address a, or 0.
func (t *spanTable) lookup(a uintptr) uint8 {
	key := a>>(t.shift&63) + 1 // the mask spares the compiler's check for shifts of 64 or more
	for i := key; ; i++ {
		s := &t.slots[i%spanSlots]
		if s.key == key {
			if a < s.belowEnd {
				return s.below
			}
			if a >= s.aboveStart {
				return s.above
			}
			return 0
		}
		if s.key == 0 {
			return 0
		}
	}
}

// insert records that class c reserved the granule-sized range from lo.
func (t *spanTable) insert(lo uintptr, c uint8) {
	s := t.slot(lo >> t.shift)
	s.aboveStart, s.above = lo, c
	if lo&(1<<t.shift-1) != 0 {
		s = t.slot(lo>>t.shift + 1)
		s.belowEnd, s.below = lo+1<<t.shift, c
	}
}

// slot returns the slot of granule g, taking an empty one if g has none.
func (t *spanTable) slot(g uintptr) *spanSlot {
	key := g + 1
	for i := key; ; i++ {
		s := &t.slots[i%spanSlots]
		if s.key == key {
			return s
		}
		if s.key == 0 {
			*s = spanSlot{key: key, aboveStart: ^uintptr(0)}
			return s
		}
	}
}

// used returns the slots in use.
func (t *spanTable) used() int {
	n := 0
	for i := range t.slots {
		if t.slots[i].key != 0 {
			n++
		}
	}
	return n
}
