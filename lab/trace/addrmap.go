package trace

// addrMap maps the live addresses of a recorded program to the IDs of the
// objects there. Importing is one lookup per event, so this is the hot
// data structure of the package; it is 2 to 3 times faster than a Go map
// here.
//
// It is an open-addressing table with linear probing: Fibonacci hashing
// spreads addresses (aligned, and clustered in pages) over the table, and
// deletion shifts the following entries back instead of leaving
// tombstones, so probes stay short however many addresses come and go.
// While every address and ID fits in 32 bits (the traces of 32-bit
// programs, such as Android's) entries take 8 bytes instead of 16: half
// the cache misses. The first wider key or value moves every entry to the
// wide table, once.
type addrMap struct {
	narrow table[uint32]
	wide   table[uint64]
	isWide bool
}

func (m *addrMap) get(k uint64) (uint64, bool) {
	if m.isWide {
		return m.wide.get(k)
	}
	if k>>32 != 0 {
		return 0, false
	}
	v, ok := m.narrow.get(uint32(k))
	return uint64(v), ok
}

// put maps k to v; when k was mapped already it returns the ID it
// replaces.
func (m *addrMap) put(k, v uint64) (old uint64, replaced bool) {
	if !m.isWide {
		if (k|v)>>32 == 0 {
			o, ok := m.narrow.put(uint32(k), uint32(v))
			return uint64(o), ok
		}
		m.widen()
	}
	return m.wide.put(k, v)
}

// del removes address k and returns its ID.
func (m *addrMap) del(k uint64) (uint64, bool) {
	if m.isWide {
		return m.wide.del(k)
	}
	if k>>32 != 0 {
		return 0, false
	}
	v, ok := m.narrow.del(uint32(k))
	return uint64(v), ok
}

// len returns the number of addresses mapped.
func (m *addrMap) len() int {
	if m.isWide {
		return m.wide.count
	}
	return m.narrow.count
}

// widen moves every entry to the wide table.
func (m *addrMap) widen() {
	m.wide.init(max(tableMin, len(m.narrow.slots)))
	for _, s := range m.narrow.slots {
		if s.key != 0 {
			m.wide.put(uint64(s.key), uint64(s.val))
		}
	}
	m.narrow = table[uint32]{}
	m.isWide = true
}

// table is one open-addressing table of keys and values of type K.
//
// Invariants (check, in the tests): len(slots) is 0 or a power of two;
// count < len(slots)/2 after every put; key 0 marks an empty slot (address
// 0 is NULL, which importers never store); every key sits at its home
// slot or after it, with no empty slot between.
type table[K uint32 | uint64] struct {
	slots []entry[K]
	count int
	shift uint   // 64 - log2(len(slots))
	mask  uint64 // len(slots) - 1
}

type entry[K uint32 | uint64] struct {
	key K // address; 0 = empty
	val K // object ID
}

const tableMin = 1 << 10

func (t *table[K]) init(n int) {
	t.slots = make([]entry[K], n)
	t.count = 0
	t.mask = uint64(n - 1)
	t.shift = 64
	for n > 1 {
		n >>= 1
		t.shift--
	}
}

// home is the slot a key hashes to.
func (t *table[K]) home(k K) uint64 {
	return (uint64(k) * 0x9e3779b97f4a7c15) >> t.shift
}

func (t *table[K]) get(k K) (K, bool) {
	if t.slots == nil {
		return 0, false
	}
	for i := t.home(k); ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.key == k {
			return s.val, true
		}
		if s.key == 0 {
			return 0, false
		}
	}
}

func (t *table[K]) put(k, v K) (old K, replaced bool) {
	if t.slots == nil {
		t.init(tableMin)
	}
	i := t.home(k)
	for ; t.slots[i].key != 0; i = (i + 1) & t.mask {
		if t.slots[i].key == k {
			old = t.slots[i].val
			t.slots[i].val = v
			return old, true
		}
	}
	t.slots[i] = entry[K]{k, v}
	t.count++
	if 2*t.count >= len(t.slots) {
		t.grow()
	}
	return 0, false
}

func (t *table[K]) del(k K) (K, bool) {
	if t.slots == nil {
		return 0, false
	}
	i := t.home(k)
	for t.slots[i].key != k {
		if t.slots[i].key == 0 {
			return 0, false
		}
		i = (i + 1) & t.mask
	}
	v := t.slots[i].val
	// Shift back every following entry of the run that may move to the
	// hole: one whose home is not cyclically within (hole, j].
	for j := (i + 1) & t.mask; t.slots[j].key != 0; j = (j + 1) & t.mask {
		h := t.home(t.slots[j].key)
		if (j-h)&t.mask >= (j-i)&t.mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = entry[K]{}
	t.count--
	return v, true
}

// grow doubles the table.
func (t *table[K]) grow() {
	old := t.slots
	t.init(2 * len(old))
	for _, s := range old {
		if s.key == 0 {
			continue
		}
		i := t.home(s.key)
		for t.slots[i].key != 0 {
			i = (i + 1) & t.mask
		}
		t.slots[i] = s
		t.count++
	}
}
