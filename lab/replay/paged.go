package replay

import "unsafe"

// paged is a table by slot that grows a page at a time: growing it
// copies nothing and leaves no old array behind. The go row replays on
// the Go heap it measures, where a doubled slice's old array would count
// as the heap's own until a collection (and its collections come only
// from the trace's allocations: with every request in a pool in front,
// none), so the replayer's tables must hold no more than they report.
type paged[T any] struct {
	pages [][]T
	n     int // entries 0 to n-1 are in use
}

// pageEntries is the entries of one page.
const pageEntries = 4096

// at returns entry i, which must be below n.
func (p *paged[T]) at(i uint32) *T { return &p.pages[i/pageEntries][i%pageEntries] }

// push adds v as entry n and returns its index.
func (p *paged[T]) push(v T) uint32 {
	if p.n == len(p.pages)*pageEntries {
		p.pages = append(p.pages, make([]T, pageEntries))
	}
	i := uint32(p.n)
	p.n++
	*p.at(i) = v
	return i
}

// pop removes the last entry and returns it; ok is false when there is
// none.
func (p *paged[T]) pop() (v T, ok bool) {
	if p.n == 0 {
		return v, false
	}
	p.n--
	e := p.at(uint32(p.n))
	v, *e = *e, *new(T)
	return v, true
}

// bytes returns the Go memory the table holds.
func (p *paged[T]) bytes() int64 {
	var zero T
	return int64(len(p.pages))*pageEntries*int64(unsafe.Sizeof(zero)) + int64(cap(p.pages))*int64(unsafe.Sizeof([]T(nil)))
}
