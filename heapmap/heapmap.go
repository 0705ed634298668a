// Package heapmap describes a picture of one of carve's heaps at a moment:
// its address space in address order, cut into segments of live memory,
// free memory, headers, padding and memory the heap has not handed out,
// so that a user sees where the holes are. The block-allocator article's
// connection scenario leaves "100,000 separate holes of about 1 KB, each
// next to a live session object"; a map of that heap shows them, and
// counts them.
//
// The heaps build their own maps (fit.Heap.Map, buddy.Heap.Map,
// sizeclass.Heap.Map, heap.Heap.Map), each from its side metadata and boundary tags,
// never from the bytes of free memory. This package holds what they share:
// the segment vocabulary, the figures a map adds up to ([Map.Stats]), a
// checker of a map's shape ([Map.Check]). The lab draws maps (package
// lab/report's MapSVG); the library only describes them.
//
// See the carve package documentation (the root doc.go) for the overview
// and the vocabulary (Live, Used, Footprint) the heaps' maps are checked
// against.
package heapmap

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// Kind says what a segment's bytes are.
type Kind uint8

const (
	// Live is bytes of a block in use that its caller may use. No carve
	// heap records the size a block was asked for, so in a heap's own map
	// the rounding up to the block's usable size is Live too: a heap's
	// Stats().Live is at most its map's Live bytes. A caller that knows the
	// sizes asked for splits them off as Rounding (Map.SplitAsked).
	Live Kind = iota
	// Free is a block, or a run of chunks, that the heap could hand out
	// again: a hole. Each Free segment is one hole (see [Map.Append]).
	Free
	// Header is bookkeeping the heap keeps in front of a block in use: a
	// boundary tag, a buddy header.
	Header
	// Padding is bytes inside the heap's committed memory that no block
	// can use where they are: alignment gaps before a header, a slab's
	// tail too short for a chunk, a heap's unused first word.
	Padding
	// Unused is committed memory never handed out since it was committed:
	// fit's top, the uncarved chunks of a slab, a buddy granule's tail past
	// the heap's span.
	Unused
	// Reserved is address space the map covers with no memory behind it:
	// free buddy blocks in granules given back to the OS. It is not part
	// of the Footprint.
	Reserved
	// Rounding is bytes of a block in use beyond the size its caller asked
	// for: the rounding up to a size class, a power of two, a granule. No
	// heap's own map holds any (see Live); Map.SplitAsked makes them.
	Rounding

	numKinds
)

// NumKinds is the number of kinds: a Kind is one of 0 to NumKinds-1.
const NumKinds = int(numKinds)

var kindNames = [numKinds]string{"live", "free", "header", "padding", "unused", "reserved", "rounding"}

// Kinds returns every kind, in the order legends list them.
func Kinds() []Kind { return []Kind{Live, Rounding, Free, Header, Padding, Unused, Reserved} }

// String returns the kind's name: "live", "free", "header", "padding",
// "unused", "reserved" or "rounding".
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Segment is Len bytes of one kind at offset Off of a map's space.
type Segment struct {
	Off, Len int64
	Kind     Kind
	// Class is the block's class as its heap names it: for buddy, the
	// order (a block of 2^Class bytes); for sizeclass, the chunk size in
	// bytes, 0 for a large object; 0 for fit.
	Class int
}

// End returns the offset just past the segment.
func (s Segment) End() int64 { return s.Off + s.Len }

// Region is a labelled part of a map's space: sizeclass labels each
// class's slabs, and its large objects.
type Region struct {
	Off, Len int64
	Label    string
}

// Map is a heap's address space at one moment, as segments that tile
// [0, Size) in address order. What the space is depends on the heap (see
// each heap's Map method): for fit, its committed region; for buddy, the
// part of its span up to the last committed granule; for sizeclass, each
// class's committed slabs laid side by side, then the large objects.
//
// A map holds one Segment (32 bytes) per run of one kind: two per block in
// use with a header, one per hole. It is a copy: the heap may change
// afterwards without changing the map.
type Map struct {
	// Name is the allocator's name: "first-fit", "buddy-header",
	// "sizeclass" and so on.
	Name string
	// Base is the address of offset 0, or 0 if the space is not one range
	// of addresses (sizeclass).
	Base uintptr
	// Size is the bytes the segments cover.
	Size int64
	// Segments tile [0, Size) in address order.
	Segments []Segment
	// Regions are labelled parts of the space, in order and disjoint; nil
	// for heaps that label none.
	Regions []Region
	// Spans say where the space lies in memory when it is not one range
	// from Base (sizeclass's slabs, laid side by side): each a piece of the
	// space and its address, sorted by address. nil when Base says it all.
	Spans []Span
}

// Span is a piece of a map's space, [Off, Off+Len), at address Addr.
type Span struct {
	Off, Len int64
	Addr     uintptr
}

// Offset returns the offset in the map's space of the byte at address
// addr, and false if the map does not cover it (or cannot tell: a space
// that is neither one range from Base nor described by Spans).
func (m Map) Offset(addr uintptr) (int64, bool) {
	if m.Spans == nil {
		if m.Base == 0 || addr < m.Base || addr-m.Base >= uintptr(m.Size) {
			return 0, false
		}
		return int64(addr - m.Base), true
	}
	lo, hi := 0, len(m.Spans)
	for lo < hi { // the last span starting at or below addr
		mid := (lo + hi) / 2
		if m.Spans[mid].Addr <= addr {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		return 0, false
	}
	s := m.Spans[lo-1]
	if addr-s.Addr >= uintptr(s.Len) {
		return 0, false
	}
	return s.Off + int64(addr-s.Addr), true
}

// Block is a block in use as its caller knows it: where it starts in a
// map's space, the bytes asked for, and the bytes it can hold.
type Block struct {
	Off, Asked, Usable int64
}

// SplitAsked returns a copy of the map in which each block's bytes past
// the size asked for, up to its usable size, are Rounding instead of
// Live: the map of a heap seen by a caller that knows what it asked for.
// blocks may come in any order; a block that does not start inside a
// Live segment, or that does not fit in it, is left as the heap mapped
// it. The map's Stats().Live is then the bytes asked for of the blocks
// given, if every live block is among them. O(segments + blocks log
// blocks).
func (m Map) SplitAsked(blocks []Block) Map {
	bs := append([]Block(nil), blocks...)
	slices.SortFunc(bs, func(a, b Block) int { return cmp.Compare(a.Off, b.Off) })
	out := m
	out.Segments = nil
	out.Size = 0
	i := 0
	for _, s := range m.Segments {
		if s.Kind != Live {
			out.Append(s.Kind, s.Class, s.Len)
			continue
		}
		at := s.Off
		for ; i < len(bs) && bs[i].Off < s.End(); i++ {
			b := bs[i]
			if b.Off < at || b.Off+b.Usable > s.End() || b.Asked > b.Usable {
				continue
			}
			out.Append(Live, s.Class, b.Off-at) // bytes no block given holds
			out.Append(Live, s.Class, b.Asked)
			out.Append(Rounding, s.Class, b.Usable-b.Asked)
			at = b.Off + b.Usable
		}
		out.Append(Live, s.Class, s.End()-at)
	}
	return out
}

// Append adds n bytes of kind k and class class at the end of the map,
// growing Size by n; n <= 0 adds nothing. The bytes join the last segment
// when that has the same kind and class, unless they are Free: every Free
// segment a heap appends is one hole (a free block, or a run of free
// chunks), and stays one, so that Stats counts holes as the heap sees
// them.
func (m *Map) Append(k Kind, class int, n int64) {
	if n <= 0 {
		return
	}
	if i := len(m.Segments) - 1; i >= 0 && k != Free && m.Segments[i].Kind == k && m.Segments[i].Class == class {
		m.Segments[i].Len += n
	} else {
		m.Segments = append(m.Segments, Segment{Off: m.Size, Len: n, Kind: k, Class: class})
	}
	m.Size += n
}

// Stats is what a map adds up to: bytes of each kind, and its holes. For
// a map that passes Check:
//
//	Live + Rounding + Free + Header + Padding + Unused + Reserved = Size
//	Largest <= Free, and Holes > 0 exactly when Free > 0
//
// and against its heap's statistics (each heap's Map documents its own):
//
//	fit:       Live + Header = Used, Header = HeaderBytes, Free = FreeBytes,
//	           Holes = FreeBlocks, Largest = Largest, Unused = Top, Size = Footprint
//	buddy:     Live + Header + Padding = Used, Header + Padding = HeaderBytes,
//	           Size - Reserved = Footprint
//	sizeclass: Live = Used, Size = Footprint
type Stats struct {
	Live, Free, Header, Padding, Unused, Reserved, Rounding int64 // bytes of each kind
	// Holes counts the Free segments; Largest is the longest.
	Holes   int
	Largest int64
}

// Bytes returns the bytes of kind k.
func (s Stats) Bytes(k Kind) int64 {
	switch k {
	case Live:
		return s.Live
	case Free:
		return s.Free
	case Header:
		return s.Header
	case Padding:
		return s.Padding
	case Unused:
		return s.Unused
	case Reserved:
		return s.Reserved
	case Rounding:
		return s.Rounding
	}
	return 0
}

func (s *Stats) add(seg Segment) {
	switch seg.Kind {
	case Live:
		s.Live += seg.Len
	case Free:
		s.Free += seg.Len
		s.Holes++
		s.Largest = max(s.Largest, seg.Len)
	case Header:
		s.Header += seg.Len
	case Padding:
		s.Padding += seg.Len
	case Unused:
		s.Unused += seg.Len
	case Reserved:
		s.Reserved += seg.Len
	case Rounding:
		s.Rounding += seg.Len
	}
}

// Stats returns the map's figures, in O(segments).
func (m Map) Stats() Stats {
	var st Stats
	for _, s := range m.Segments {
		st.add(s)
	}
	return st
}

// ErrShape reports a map whose segments or regions do not tile its space
// as a Map must.
var ErrShape = errors.New("heapmap: malformed map")

// Check verifies the map's shape and returns an error wrapping ErrShape
// for the first fault: every segment of positive length and a known kind,
// each starting where the one before ends, the first at 0, the last
// ending at Size; regions of positive length, in order, disjoint, inside
// [0, Size). Maps the heaps build pass it; it is for tests, and for maps
// built by hand.
func (m Map) Check() error {
	var end int64
	for i, s := range m.Segments {
		switch {
		case s.Len <= 0:
			return fmt.Errorf("%w: segment %d at %d: length %d", ErrShape, i, s.Off, s.Len)
		case s.Kind >= numKinds:
			return fmt.Errorf("%w: segment %d at %d: %v", ErrShape, i, s.Off, s.Kind)
		case s.Off != end:
			return fmt.Errorf("%w: segment %d starts at %d, the one before ends at %d", ErrShape, i, s.Off, end)
		}
		end = s.End()
	}
	if end != m.Size {
		return fmt.Errorf("%w: segments end at %d, Size is %d", ErrShape, end, m.Size)
	}
	end = 0
	for i, r := range m.Regions {
		if r.Len <= 0 || r.Off < end || r.Off+r.Len > m.Size {
			return fmt.Errorf("%w: region %d (%q) [%d, %d): want a non-empty range from %d to at most %d",
				ErrShape, i, r.Label, r.Off, r.Off+r.Len, end, m.Size)
		}
		end = r.Off + r.Len
	}
	return nil
}
