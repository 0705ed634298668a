package heap

import (
	"fmt"

	"github.com/carvelab/carve/internal/invariants"
	"github.com/carvelab/carve/internal/tags"
)

// This file holds the best-fit zone, for the requests no size class
// serves: best fit over one region with boundary tags, coalescing, and
// the top. The block mechanics (cutting a block from a free one, the
// aligned start, how a block resizes in place) are package tags', which
// package fit's Heap runs too; the index (treap.go) is the zone's own.
// FuzzSameAsFit holds the zone to fit's BestFit heap, the reference:
// given the same requests, the same blocks at the same offsets.
//
// The zone is a sequence of blocks tiling its region from offset 8, then
// the top: the free space past the last block. The layout is fit's, in
// package tags (see block.go). What the zone adds is its pages' states
// (see pages.go): the whole pages inside a free block, past its header
// and links and before its footer, are free, and so are the whole pages
// of the top. The purge ring gives free pages back to the OS once more
// are resident than the heap keeps (see Retain), where the zone's memory
// can be given back (see canPurge): a hole then costs no memory but the
// partial pages at its ends, and the zone needs no top to trim. Before
// each write, fits checks the clean pages the write would touch against
// the Limit and markUsed marks them used; markReleased marks the pages a
// free block or the top gains.

type midZone struct {
	zonePages
	h     *Heap    // the heap the zone is part of: its Live, Limit and purge ring
	id    zoneID   // the zone's name in the purge ring
	top   offset   // payload offset of the top; the last block ends at top-8
	first []uint16 // per committed page: the first-start table (see block.go)
	idx   index

	used, blocks          int64 // bytes and count of the blocks in use
	freeBlocks, freeBytes int64 // the free blocks in the index
}

func (m *midZone) init(h *Heap, id zoneID, n int64) error {
	m.h, m.id = h, id
	if n > 1<<(32+granShift) {
		n = 1 << (32 + granShift) // links are 32-bit granule numbers
	}
	if err := m.zonePages.init(n, false); err != nil {
		return err
	}
	m.top = firstBlock
	return nil
}

// topStart returns where the top starts: the end of the last block, or 0
// when there is none (the first word is part of the top then).
func (m *midZone) topStart() offset {
	if m.top == firstBlock {
		return 0
	}
	return m.top - headerSize
}

// commitTo commits the zone up to end, growing the first-start table.
func (m *midZone) commitTo(end offset) error {
	if int64(end) <= m.committed {
		return nil
	}
	if err := m.commit(int64(end)); err != nil {
		return err
	}
	for len(m.first) < m.pages() {
		m.first = append(m.first, noStart)
	}
	return nil
}

// fits returns an error if taking the bytes [lo, hi) of the zone would
// take the Footprint past the Limit: if they touch too many clean pages.
func (m *midZone) fits(lo, hi offset) error {
	h := m.h
	a, b := pagesOver(lo, hi)
	n := int64(m.cleanIn(a, min(b, m.pages()))) << pageShift
	if n > 0 && h.Footprint()+n > h.limit {
		return fmt.Errorf("%w: the block would take the footprint %d past the limit %d", ErrExhausted, h.Footprint()+n, h.limit)
	}
	return nil
}

// markUsed marks the pages the bytes [lo, hi) of the zone touch as used:
// a block or a boundary tag is about to lie there. Checked builds fill
// those that were clean with poison first: the rest of such a page may
// belong to a free block, whose bytes must read as poison.
func (m *midZone) markUsed(lo, hi offset) {
	h := m.h
	a, b := pagesOver(lo, hi)
	b = min(b, m.pages())
	if invariants.Enabled {
		for i := a; i < b; i++ {
			if m.clean.has(i) {
				poison(m.bytes(offset(i)<<pageShift, pageSize))
			}
		}
	}
	h.used(&m.zonePages, a, b)
}

// markReleased marks the whole pages of [lo, hi) that also touch the bytes
// [near, nearEnd) free: the pages a free block or the top gained when the
// bytes [near, nearEnd) were freed.
func (m *midZone) markReleased(lo, hi, near, nearEnd offset) {
	h := m.h
	a, b := pageRange(lo, hi)
	c, d := pagesOver(near, nearEnd)
	h.released(m.id, max(a, c), min(b, d, m.pages()))
}

// alloc returns a best-fit block of size bytes aligned to align.
func (m *midZone) alloc(size, align int) ([]byte, error) {
	h := m.h
	s := tags.BlockSize(size)
	top := m.top
	var p offset
	var err error
	switch {
	case align > granule:
		p, err = m.allocAligned(s, uintptr(align))
	default:
		if p = m.find(s); p != 0 {
			err = m.take(p, s)
		} else {
			p, err = m.fromTop(s)
		}
	}
	if err != nil {
		return nil, err
	}
	m.setAsked(p, size)
	h.live += int64(size)
	if m.top != top {
		h.checkSlow() // the zone grew
	}
	return m.bytes(p, size), nil
}

// asked returns how many bytes the caller asked of the block in use whose
// header is hd: its usable bytes less its slack.
func asked(hd header) int { return int(hd.Size() - headerSize - hd.Slack()) }

// setAsked records in the header of the block in use at p that its
// caller asked for n of its usable bytes. The slack is below 256: a block
// is the request rounded up to the granule, at least minBlock, plus a rest
// too small to split off (under minBlock), 40 bytes at most in all.
func (m *midZone) setAsked(p offset, n int) {
	hd := m.hdr(p)
	*hd = hd.WithSlack(hd.Size() - headerSize - uintptr(n))
}

// inUse returns the block in use that b starts, as owned finds it,
// refused if b is an empty slice of capacity 0 and the block holds more
// than 0 bytes (see pastEnd).
func (m *midZone) inUse(b []byte) (offset, error) {
	p, err := m.owned(addr(b))
	if err == nil && cap(b) == 0 {
		if n := asked(*m.hdr(p)); n != 0 {
			return 0, pastEnd(addr(b), n)
		}
	}
	return p, err
}

// take hands out s bytes of the free block at p (see tags.Carve): all of
// it when the rest would be smaller than minBlock, else the first s bytes,
// the rest becoming a free block. It fails, changing nothing, when the
// pages the block and the rest's tags touch would pass the Limit.
func (m *midZone) take(p offset, s uintptr) error {
	b := m.hdr(p).Size()
	hi := cutEnd(p, b, s)
	if err := m.fits(p-headerSize, hi); err != nil {
		return err
	}
	if invariants.Enabled {
		m.verifyPoison(p, b, p, s)
	}
	m.markUsed(p-headerSize, hi)
	// A free block's predecessor is in use, and a block in use follows it.
	s, rest := tags.Carve(m.base, p, b, s, true)
	if rest != 0 {
		r := p + offset(s)
		m.addStart(r)
		m.replace(p, b, r, rest)
	} else {
		m.remove(p, b)
	}
	m.used += int64(s)
	m.blocks++
	return nil
}

// cutEnd returns the end of the bytes a carve of s bytes from the n free
// bytes at x writes (see tags.Carve): with a rest, the rest's header and
// links; without, all n bytes, up to the next block's header.
func cutEnd(x offset, n, s uintptr) offset {
	if _, rest := tags.Cut(n, s); rest != 0 {
		return x + offset(s) + headerSize
	}
	return x - headerSize + offset(n)
}

// use makes the b bytes at p, out of the index and followed by a block in
// use, a block in use of s <= b bytes, and the rest, if at least minBlock,
// a free block (see tags.Carve). p is recorded as a block start already.
func (m *midZone) use(p offset, b, s uintptr, prevInUse bool) {
	s, rest := tags.Carve(m.base, p, b, s, prevInUse)
	if rest != 0 {
		r := p + offset(s)
		m.addStart(r)
		m.insert(r, rest)
	}
	m.used += int64(s)
	m.blocks++
}

// fromTop carves a block of s bytes from the bottom of the top.
func (m *midZone) fromTop(s uintptr) (offset, error) {
	p := m.top
	end := p - headerSize + offset(s)
	if err := m.commitTo(end); err != nil {
		return 0, err
	}
	if err := m.fits(p-headerSize, end); err != nil {
		return 0, err
	}
	m.markUsed(p-headerSize, end)
	*m.hdr(p) = tags.NewHeader(s, true, true) // the block before the top is in use
	m.addStart(p)
	m.top = p + offset(s)
	m.used += int64(s)
	m.blocks++
	return p, nil
}

// allocAligned returns a block of s bytes at a multiple of align (32 to
// MaxAlign). It takes a free block of s+align+16 bytes, or the top: enough
// that an aligned address lies either at its start or at least minBlock
// into it, the bytes before becoming a free block (see tags.AlignedStart).
func (m *midZone) allocAligned(s, align uintptr) (offset, error) {
	p := m.find(tags.AlignedSpan(s, align))
	var b uintptr // the free block's size; 0 for the top
	if p != 0 {
		b = m.hdr(p).Size()
	} else {
		p = m.top
	}
	q := tags.AlignedStart(p, align)
	gap := uintptr(q - p)
	lo := q - headerSize // the first byte written: the block's header, or the gap's footer
	if gap > 0 {
		lo = q - 2*headerSize
	}
	if b == 0 {
		end := q - headerSize + offset(s)
		if err := m.commitTo(end); err != nil {
			return 0, err
		}
		if err := m.fits(p-headerSize, end); err != nil {
			return 0, err
		}
		m.markUsed(lo, end)
		if gap > 0 {
			m.markUsed(p-headerSize, p+headerSize) // the gap's header and links
			if invariants.Enabled {
				m.poisonFree(p, p+offset(gap)-headerSize) // fresh from the top
			}
			tags.SetFree(m.base, p, gap)
			m.addStart(p)
			m.insert(p, gap)
		}
		*m.hdr(q) = tags.NewHeader(s, true, gap == 0)
		m.addStart(q)
		m.top = q + offset(s)
		m.used += int64(s)
		m.blocks++
		return q, nil
	}
	hi := cutEnd(q, b-gap, s)
	if err := m.fits(lo, hi); err != nil {
		return 0, err
	}
	if invariants.Enabled {
		m.verifyPoison(p, b, q, s)
	}
	m.markUsed(lo, hi)
	m.remove(p, b)
	if gap > 0 {
		tags.SetFree(m.base, p, gap)
		m.insert(p, gap)
		m.addStart(q)
	}
	m.use(q, b-gap, s, gap == 0)
	return q, nil
}

// owned returns the offset of the block in use that starts at address a,
// or the error saying why there is none. It walks the headers from the
// first block on a's page, at most a page of them.
func (m *midZone) owned(a uintptr) (offset, error) {
	p := offset(a - uintptr(m.base))
	if p >= firstBlock && p < m.top && p%granule == 0 {
		if f := m.first[p>>pageShift]; f != noStart {
			q := p&^(pageSize-1) + offset(f)
			for q < p {
				n := m.hdr(q).Size()
				if n < minBlock {
					break // a header overwritten by a write out of bounds
				}
				q += offset(n)
			}
			if q == p && m.hdr(p).InUse() {
				return p, nil
			}
		}
	}
	return 0, m.notOwned(p, a)
}

// notOwned explains why the address a, at offset p, is not the start of a
// block in use. It reads the zone's memory only below the top, and only
// headers.
func (m *midZone) notOwned(p offset, a uintptr) error {
	switch {
	case uint64(p) >= uint64(m.reserved):
		return fmt.Errorf("%w: %#x lies outside the heap's memory", ErrForeign, a)
	case p%granule != 0 || p < firstBlock:
		return fmt.Errorf("%w: %#x (offset %d of the best-fit zone): no block starts there (blocks start at offsets that are multiples of %d, from %d)",
			ErrForeign, a, p, granule, firstBlock)
	case p >= m.top:
		return fmt.Errorf("%w: %#x (offset %d) lies in the free top of the best-fit zone (from offset %d)", ErrDoubleFree, a, p, m.top)
	}
	q := m.blockAt(p)
	return tags.NotAtStart(a, p, q, *m.hdr(q), ErrForeign, ErrDoubleFree)
}

// blockAt returns the block that holds offset p, firstBlock <= p < top:
// it looks back for the last page on which a block starts, at or before
// p, and walks the headers from there. It costs a step per page the
// block spans: for error messages and checks, not for the fast paths.
func (m *midZone) blockAt(p offset) offset {
	q := firstBlock
	for pg := p >> pageShift; ; pg-- {
		if f := m.first[pg]; f != noStart && pg<<pageShift+offset(f) <= p {
			q = pg<<pageShift + offset(f)
			break
		}
		if pg == 0 {
			break
		}
	}
	for {
		n := q + offset(m.hdr(q).Size())
		if n > p {
			return q
		}
		q = n
	}
}

// freeBlock frees the block in use at p.
func (m *midZone) freeBlock(p offset) {
	h := m.h
	hd := *m.hdr(p)
	s := hd.Size()
	h.live -= int64(asked(hd))
	m.used -= int64(s)
	m.blocks--
	x, xEnd := p-headerSize, p-headerSize+offset(s) // the freed bytes
	if invariants.Enabled && p+offset(s) != m.top {
		poison(m.bytes(p, int(s-headerSize)))
	}
	if !hd.PrevInUse() {
		// Merge with the free block before: its footer gives its size.
		ps := uintptr(*tags.PrevFooter(m.base, p))
		q := p - offset(ps)
		m.remove(q, ps)
		m.removeStart(p, m.startAfter(p+offset(s)))
		if invariants.Enabled {
			poison(m.bytes(p-2*headerSize, 2*headerSize)) // q's footer, p's header
		}
		p, s = q, s+ps
	}
	m.releaseBlock(p, s, x, xEnd)
}

// releaseBlock makes the s bytes at p a free block, merged with the block
// after it if that is free, or into the top. The block before it is in
// use; [x, xEnd) are the bytes just freed, which the pages gaining their
// freedom touch.
func (m *midZone) releaseBlock(p offset, s uintptr, x, xEnd offset) {
	near, nearEnd := max(x, 2*headerSize)-2*headerSize, xEnd+2*headerSize // with the neighbours' tags
	next := p + offset(s)
	if next == m.top {
		m.removeStart(p, 0)
		m.top = p
		m.markReleased(m.topStart(), offset(m.committed), near, nearEnd)
		m.markReleased(m.topStart(), offset(m.committed), p-2*headerSize, p+headerSize) // p's header and links, if p was free; the first word if p is the first block
		return
	}
	nh := *m.hdr(next)
	if nh.InUse() {
		*m.hdr(next) = nh.WithPrev(false)
	} else {
		ns := nh.Size()
		m.remove(next, ns)
		m.removeStart(next, next+offset(ns)) // a free block is followed by a block in use
		if invariants.Enabled {
			poison(m.bytes(next-headerSize, 2*headerSize)) // next's header and links
		}
		s += ns
	}
	tags.SetFree(m.base, p, s)
	m.insert(p, s)
	m.markReleased(p+headerSize, p+offset(s)-2*headerSize, near, nearEnd)
}

// realloc resizes the block in use at p, which b starts.
func (m *midZone) realloc(b []byte, p offset, size int) ([]byte, error) {
	h := m.h
	switch {
	case size < 0:
		return nil, fmt.Errorf("%w: Realloc(%d): size is negative (want >= 0)", ErrSize, size)
	case int64(size) > h.limit:
		return nil, fmt.Errorf("%w: Realloc(%d): size exceeds the limit %d", ErrExhausted, size, h.limit)
	}
	hd := *m.hdr(p)
	s := hd.Size()
	old := asked(hd)
	need := tags.BlockSize(size)
	next := p + offset(s)
	switch tags.ResizeOf(m.base, p, s, need, m.top) {
	case tags.Shrink:
		if s-need >= minBlock {
			*m.hdr(p) = tags.NewHeader(need, true, hd.PrevInUse())
			m.used -= int64(s - need)
			t := p + offset(need)
			if invariants.Enabled && next != m.top {
				poison(m.bytes(t, int(s-need-headerSize)))
			}
			m.addStart(t)
			m.releaseBlock(t, s-need, t-headerSize, next-headerSize)
		}
	case tags.IntoTop:
		end := p - headerSize + offset(need)
		if err := m.commitTo(end); err != nil {
			return nil, fmt.Errorf("Realloc(%d): %w", size, err)
		}
		if err := m.fits(next-headerSize, end); err != nil {
			return nil, fmt.Errorf("Realloc(%d): %w", size, err)
		}
		m.markUsed(next-headerSize, end)
		*m.hdr(p) = tags.NewHeader(need, true, hd.PrevInUse())
		m.top = p + offset(need)
		m.used += int64(need - s)
	case tags.IntoNext:
		ns := m.hdr(next).Size()
		hi := cutEnd(p, s+ns, need)
		if err := m.fits(next-headerSize, hi); err != nil {
			return nil, fmt.Errorf("Realloc(%d): %w", size, err)
		}
		if invariants.Enabled {
			m.verifyPoison(next, ns, p, need)
		}
		m.markUsed(next-headerSize, hi)
		m.remove(next, ns)
		m.removeStart(next, next+offset(ns))
		m.used -= int64(s)
		m.blocks--
		m.use(p, s+ns, need, hd.PrevInUse())
	default:
		n, err := h.move(b[:min(uintptr(len(b)), s-headerSize)], size)
		if err == nil {
			m.freeBlock(p)
		}
		return n, err
	}
	m.setAsked(p, size)
	h.live += int64(size - old)
	return m.bytes(p, size), nil
}
