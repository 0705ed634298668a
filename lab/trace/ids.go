package trace

import "math/bits"

// IDs holds a value for each of a set of object IDs: what a reader of a
// trace keeps about its live objects. Traces number their objects from 1
// up (a recorder's counter, carve's native format): an ID below DenseIDs
// is kept in a page of PageIDs values, made when an ID in it is first set
// and dropped when its last is deleted, so that a table of IDs born and
// freed in order holds the pages of the live ones and costs an index,
// not a hash; any other ID is kept in a map, and so is one whose page
// would leave the pages less than one part in minDensity full (IDs
// scattered over the dense range cost a map entry each, never a page
// each). A Go map under a churn of inserts and deletes fills with
// tombstones, and its lookups probe long: on a trace of millions of
// objects the pages are several times faster. The zero IDs is empty and
// ready to use.
type IDs[V any] struct {
	pages  []*idPage[V] // page i holds IDs i*PageIDs to (i+1)*PageIDs - 1; nil while it holds none
	npages int          // the pages not nil
	inPage int          // the IDs the pages hold
	sparse map[uint64]V
}

// DenseIDs bounds the IDs an IDs table keeps in pages, and PageIDs is how
// many one page holds.
const (
	DenseIDs = 1 << 26
	PageIDs  = 1 << 10
)

// minDensity: a new page is made while the pages hold at least
// PageIDs/minDensity IDs each on average (or are few).
const minDensity = 64

type idPage[V any] struct {
	has  [PageIDs / 64]uint64
	vals [PageIDs]V
	n    int
}

// Len returns how many IDs the table holds.
func (t *IDs[V]) Len() int { return t.inPage + len(t.sparse) }

// page returns id's page and index in it, or nil.
func (t *IDs[V]) page(id uint64) (*idPage[V], uint64) {
	if i := id / PageIDs; id < DenseIDs && i < uint64(len(t.pages)) {
		return t.pages[i], id % PageIDs
	}
	return nil, 0
}

// Get returns id's value and whether the table holds id.
func (t *IDs[V]) Get(id uint64) (V, bool) {
	if p, j := t.page(id); p != nil && p.has[j/64]&(1<<(j%64)) != 0 {
		return p.vals[j], true
	}
	v, ok := t.sparse[id]
	return v, ok
}

// Set gives id the value v.
func (t *IDs[V]) Set(id uint64, v V) {
	p, j := t.page(id)
	if p == nil || len(t.sparse) > 0 {
		if _, ok := t.sparse[id]; ok {
			t.sparse[id] = v
			return
		}
	}
	if p == nil && id < DenseIDs && (t.npages < minDensity || t.npages*PageIDs/minDensity <= t.inPage) {
		i := int(id / PageIDs)
		if i >= len(t.pages) {
			t.pages = append(t.pages, make([]*idPage[V], i+1-len(t.pages))...)
		}
		p, j = new(idPage[V]), id%PageIDs
		t.pages[i] = p
		t.npages++
	}
	if p == nil {
		if t.sparse == nil {
			t.sparse = map[uint64]V{}
		}
		t.sparse[id] = v
		return
	}
	if bit := uint64(1) << (j % 64); p.has[j/64]&bit == 0 {
		p.has[j/64] |= bit
		p.n++
		t.inPage++
	}
	p.vals[j] = v
}

// Delete removes id from the table, if it holds it.
func (t *IDs[V]) Delete(id uint64) {
	p, j := t.page(id)
	if bit := uint64(1) << (j % 64); p != nil && p.has[j/64]&bit != 0 {
		p.has[j/64] &^= bit
		var zero V
		p.vals[j] = zero
		p.n--
		t.inPage--
		if p.n == 0 {
			t.pages[id/PageIDs] = nil
			t.npages--
		}
		return
	}
	delete(t.sparse, id)
}

// All calls yield for each ID the table holds and its value, the IDs in
// pages in increasing order first, until yield returns false. The table
// must not change during the walk.
func (t *IDs[V]) All(yield func(id uint64, v V) bool) {
	for i, p := range t.pages {
		if p == nil {
			continue
		}
		for w, word := range p.has {
			for ; word != 0; word &= word - 1 {
				j := uint64(w)*64 + uint64(bits.TrailingZeros64(word))
				if !yield(uint64(i)*PageIDs+j, p.vals[j]) {
					return
				}
			}
		}
	}
	for id, v := range t.sparse {
		if !yield(id, v) {
			return
		}
	}
}
