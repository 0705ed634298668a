package heap

import "unsafe"

// This file holds the best-fit zone's block layout: offsets, links,
// headers and footers, and the few unsafe conversions that read and write
// them in the zone's memory. It is fit's layout (see package fit).

// offset is a distance in bytes from a zone's base. A best-fit block is
// known by the offset of its payload, a multiple of granule; its header is
// the word before. Offset 0 is no block: the first payload is at 16.
type offset uintptr

// link is a block's offset in granules, in the 32 bits a free block has
// room for (the best-fit zone reserves at most 64 GiB, 2^32 granules).
// The zero link is none.
type link uint32

func (o offset) link() link   { return link(o >> granShift) }
func (l link) offset() offset { return offset(l) << granShift }

// The layout.
const (
	// headerSize is the boundary tag in front of every block: its size and
	// two flag bits (in use; previous block in use).
	headerSize = 8
	// granule is the unit of block sizes and the alignment of every
	// payload.
	granule   = 16
	granShift = 4
	// minBlock is the smallest block: a free block holds its header, its
	// links and its footer.
	minBlock = 32
	// firstBlock is the payload offset of the first block: the zone's first
	// 8 bytes are never used, which puts every payload on a multiple of 16.
	firstBlock offset = granule
)

// header is a block's boundary tag: its size in bytes (a multiple of
// granule, header included) with two flags in the low bits.
type header uint64

const (
	inUseBit     header = 1 // the block is in use
	prevInUseBit header = 2 // the block before it is in use (or it is the first)
	flagBits            = inUseBit | prevInUseBit
)

func mkHeader(size uintptr, inUse, prevInUse bool) header {
	h := header(size)
	if inUse {
		h |= inUseBit
	}
	if prevInUse {
		h |= prevInUseBit
	}
	return h
}

func (h header) size() uintptr   { return uintptr(h &^ flagBits) }
func (h header) inUse() bool     { return h&inUseBit != 0 }
func (h header) prevInUse() bool { return h&prevInUseBit != 0 }
func (h header) withPrev(b bool) header {
	if b {
		return h | prevInUseBit
	}
	return h &^ prevInUseBit
}

// The layout's sizes, checked at compile time: a header is one word, and
// a free block of minBlock bytes holds its header, two links and a footer.
var (
	_ [headerSize - unsafe.Sizeof(header(0))]struct{}
	_ [unsafe.Sizeof(header(0)) - headerSize]struct{}
	_ [minBlock - headerSize - unsafe.Sizeof([2]link{}) - 8]struct{}
)

// blockSize returns the size of the block that holds a request of n bytes:
// n plus the header, rounded up to the granule, at least minBlock.
func blockSize(n int) uintptr {
	return max((uintptr(n)+headerSize+granule-1)&^(granule-1), minBlock)
}

// The accessors below turn offsets into pointers. Every offset they get
// lies in committed memory of the zone (the callers' invariants say so;
// check verifies them), on a page that is not clean, and the words they
// address are aligned.

// hdr returns the header of the block at p.
func (m *midZone) hdr(p offset) *header {
	return (*header)(unsafe.Add(m.base, p-headerSize))
}

// footer returns the footer of the free block at p of size s: its last
// word, just before the next block's header.
func (m *midZone) footer(p offset, s uintptr) *uint64 {
	return (*uint64)(unsafe.Add(m.base, p+offset(s)-2*headerSize))
}

// prevFooter returns the footer of the block before the one at p, valid
// when that block is free.
func (m *midZone) prevFooter(p offset) *uint64 {
	return (*uint64)(unsafe.Add(m.base, p-2*headerSize))
}

// links returns the two links a free block keeps at the start of its
// payload: next and previous in a bin.
func (m *midZone) links(p offset) *[2]link {
	return (*[2]link)(unsafe.Add(m.base, p))
}

// bytes returns n bytes at offset p, with cap == n.
func (m *midZone) bytes(p offset, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(m.base, p)), n)
}

// setFree writes the boundary tags of a free block at p of size s, whose
// predecessor is in use.
func (m *midZone) setFree(p offset, s uintptr) {
	*m.hdr(p) = mkHeader(s, false, true)
	*m.footer(p, s) = uint64(s)
}

// setPrev sets or clears the P flag of the block at p.
func (m *midZone) setPrev(p offset, inUse bool) {
	hd := m.hdr(p)
	*hd = hd.withPrev(inUse)
}

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
