// Package tags holds the boundary-tag blocks that fit's heap and the
// best-fit zone of package heap share: the layout (offsets, links,
// headers and footers, its constants, and the few unsafe conversions that
// read and write them in a region's memory), the block mechanics both
// run (carve.go), best fit's bins and treap key (bins.go), and the
// checker of the tiling (check.go). Package fit's Heap doc draws the
// layout.
//
// A region is known by its base pointer, which the accessors take: they
// are the one place where an offset becomes a pointer.
package tags

import "unsafe"

// The layout.
const (
	// HeaderSize is the boundary tag in front of every block: its size,
	// two flag bits (in use; previous block in use) and its slack (see
	// Header).
	HeaderSize = 8
	// Granule is the unit of block sizes and the alignment of every
	// payload.
	Granule   = 16
	GranShift = 4 // log2(Granule)
	// MinBlock is the smallest block: a free block holds its header, its
	// two links and its footer.
	MinBlock = 32
	// FirstBlock is the payload offset of the first block: a region's first
	// 8 bytes are never used, which puts the first header at 8 and every
	// payload on a multiple of 16.
	FirstBlock Offset = Granule
)

// Offset is a distance in bytes from a region's base. A block is known by
// the offset of its payload, a multiple of Granule; its header is the word
// before. Offset 0 is no block: the first payload is at FirstBlock.
type Offset uintptr

// Link is a block's offset in granules, in the 32 bits a free block has
// room for: a region of up to 2^32 granules (64 GiB). The zero link is
// none.
type Link uint32

// Link returns o in granules.
func (o Offset) Link() Link { return Link(o >> GranShift) }

// Offset returns the offset l stands for.
func (l Link) Offset() Offset { return Offset(l) << GranShift }

// Header is a block's boundary tag: its size in bytes (a multiple of
// Granule, header included, below 2^56) with two flags in the low bits,
// which sizes never use, and in its top byte the block's slack: how many
// of a block in use's usable bytes its caller did not ask for, which the
// heap's best-fit zone keeps there so that Free accounts the block by
// what was asked of it (fit leaves it 0; a free block's is 0).
type Header uint64

const (
	InUseBit     Header = 1 // the block is in use
	PrevInUseBit Header = 2 // the block before it is in use (or it is the first)
	FlagBits            = InUseBit | PrevInUseBit

	slackShift        = 56
	sizeBits   Header = 1<<slackShift - 1 - FlagBits
)

// NewHeader returns the header of a block of size bytes with the two
// flags.
func NewHeader(size uintptr, inUse, prevInUse bool) Header {
	h := Header(size)
	if inUse {
		h |= InUseBit
	}
	if prevInUse {
		h |= PrevInUseBit
	}
	return h
}

func (h Header) Size() uintptr   { return uintptr(h & sizeBits) }
func (h Header) InUse() bool     { return h&InUseBit != 0 }
func (h Header) PrevInUse() bool { return h&PrevInUseBit != 0 }
func (h Header) Slack() uintptr  { return uintptr(h >> slackShift) }

// WithSlack returns h with its slack set to n, 0 <= n < 256.
func (h Header) WithSlack(n uintptr) Header {
	return h&(sizeBits|FlagBits) | Header(n)<<slackShift
}

// WithPrev returns h with the P flag set to b.
func (h Header) WithPrev(b bool) Header {
	if b {
		return h | PrevInUseBit
	}
	return h &^ PrevInUseBit
}

// The layout's sizes, checked at compile time: a header is one word of
// HeaderSize bytes, and a free block's two links fill the 8 bytes after
// it, so that a free block of MinBlock bytes holds its header, its links
// and its footer.
var (
	_ [HeaderSize - unsafe.Sizeof(Header(0))]struct{}
	_ [unsafe.Sizeof(Header(0)) - HeaderSize]struct{}
	_ [MinBlock - HeaderSize - unsafe.Sizeof([2]Link{}) - 8]struct{}
)

// BlockSize returns the size of the block that holds a request of n
// bytes, 0 <= n <= the region's limit: n plus the header, rounded up to
// the granule, at least MinBlock.
func BlockSize(n int) uintptr {
	return max((uintptr(n)+HeaderSize+Granule-1)&^(Granule-1), MinBlock)
}

// The accessors below turn offsets into pointers. Every offset they get
// lies in committed memory of the region at base (the callers' invariants
// say so; their checkers verify them), and the words they address are
// aligned: headers and footers sit at 8 mod 16, links at payload starts.

// Hdr returns the header of the block at p.
func Hdr(base unsafe.Pointer, p Offset) *Header {
	return (*Header)(unsafe.Add(base, p-HeaderSize))
}

// Footer returns the footer of the free block at p of size s: its last
// word, just before the next block's header.
func Footer(base unsafe.Pointer, p Offset, s uintptr) *uint64 {
	return (*uint64)(unsafe.Add(base, p+Offset(s)-2*HeaderSize))
}

// PrevFooter returns the footer of the block before the one at p, valid
// when that block is free.
func PrevFooter(base unsafe.Pointer, p Offset) *uint64 {
	return (*uint64)(unsafe.Add(base, p-2*HeaderSize))
}

// Links returns the two link words a free block keeps at the start of its
// payload (what they mean is the index's to say).
func Links(base unsafe.Pointer, p Offset) *[2]Link {
	return (*[2]Link)(unsafe.Add(base, p))
}

// Bytes returns n bytes at offset p, with cap == n.
func Bytes(base unsafe.Pointer, p Offset, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(base, p)), n)
}

// SetFree writes the boundary tags of a free block at p of size s, whose
// predecessor is in use.
func SetFree(base unsafe.Pointer, p Offset, s uintptr) {
	*Hdr(base, p) = NewHeader(s, false, true)
	*Footer(base, p, s) = uint64(s)
}

// SetPrev sets or clears the P flag of the block at p.
func SetPrev(base unsafe.Pointer, p Offset, inUse bool) {
	hd := Hdr(base, p)
	*hd = hd.WithPrev(inUse)
}

// Lists of free blocks, threaded through their links: links[0] is the
// next block, links[1] the previous one, and the list is known by its
// head.

// Push puts the free block at p at the head of the list *head.
func Push(base unsafe.Pointer, head *Link, p Offset) {
	l := p.Link()
	old := *head
	*Links(base, p) = [2]Link{old, 0}
	if old != 0 {
		Links(base, old.Offset())[1] = l
	}
	*head = l
}

// Unlink takes the block at p out of the list *head.
func Unlink(base unsafe.Pointer, head *Link, p Offset) {
	l := Links(base, p)
	next, prev := l[0], l[1]
	if prev == 0 {
		*head = next
	} else {
		Links(base, prev.Offset())[0] = next
	}
	if next != 0 {
		Links(base, next.Offset())[1] = prev
	}
}
