package heap

import "github.com/carvelab/carve/internal/tags"

// This file holds the best-fit zone's block layout, which is fit's (see
// package fit and package tags), and its first-start table.

// The layout is package tags', shared with package fit; these names keep
// it short here.
type (
	offset = tags.Offset
	link   = tags.Link
	header = tags.Header
)

const (
	headerSize = tags.HeaderSize
	granule    = tags.Granule
	granShift  = tags.GranShift
	minBlock   = tags.MinBlock
	firstBlock = tags.FirstBlock
)

// The accessors turn offsets into pointers in the zone's memory (see
// package tags). Every offset they get lies on a page that is not clean.

// hdr returns the header of the block at p.
func (m *midZone) hdr(p offset) *header { return tags.Hdr(m.base, p) }

// links returns the two links a free block keeps at the start of its
// payload: next and previous in a bin, or its children in the tree.
func (m *midZone) links(p offset) *[2]link { return tags.Links(m.base, p) }

// bytes returns n bytes at offset p, with cap == n.
func (m *midZone) bytes(p offset, n int) []byte { return tags.Bytes(m.base, p, n) }

// The first-start table: for each committed page, the offset in the page
// of the first block payload that lies on it, or noStart. Blocks tile the
// zone, so walking the headers from a page's first block finds every
// block that starts on the page: that is how a slice is validated, with
// 2 bytes of Go memory per page rather than a bit per granule.

const noStart = 0xffff

// addStart records a block that starts at p.
func (m *midZone) addStart(p offset) {
	pg, o := p>>pageShift, uint16(p&(pageSize-1))
	if f := m.first[pg]; f == noStart || o < f {
		m.first[pg] = o
	}
}

// removeStart forgets the block that started at p, whose next block
// starts at next (0: the top follows).
func (m *midZone) removeStart(p, next offset) {
	pg := p >> pageShift
	if m.first[pg] != uint16(p&(pageSize-1)) {
		return
	}
	if next != 0 && next>>pageShift == pg {
		m.first[pg] = uint16(next & (pageSize - 1))
	} else {
		m.first[pg] = noStart
	}
}

// startAfter returns x if a block starts there, x being the end of a
// block: 0 if the top starts there instead.
func (m *midZone) startAfter(x offset) offset {
	if x >= m.top {
		return 0
	}
	return x
}
