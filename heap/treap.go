package heap

import "github.com/carvelab/carve/internal/tags"

// This file holds the best-fit zone's index of free blocks, fit's best
// fit (see fit/best.go, the reference FuzzSameAsFit holds it to) with its
// tree moved into the free blocks:
// exact-size bins for blocks under binMax bytes (tags.Bins, shared with
// fit) and, for the rest, a treap; both threaded through the free blocks'
// two links, so that the index costs no Go memory.
//
// The treap is a binary search tree on the key (size in granules, link):
// one 64-bit compare orders blocks by size, then by address. A node's
// priority is a hash of its link, so the tree is also a heap on
// priorities, which keeps its expected depth at about 2 ln n whatever the
// order of insertions. Insert and remove walk down from the root with a
// pointer to the link being rewritten; there are no parent links and no
// recursion. A search reads the header of each node it passes: the page
// of a free block's header is never given back, so the walk touches no
// page the heap purged.

// binMax is the size from which free blocks go to the treap rather than a
// bin.
const binMax = tags.BinMax

// index is the best-fit zone's free blocks.
type index struct {
	bins tags.Bins // blocks under binMax bytes, one list per size
	tree treap
}

// find returns the smallest free block of at least s bytes, or 0.
func (m *midZone) find(s uintptr) offset {
	if p := m.idx.bins.Fit(s); p != 0 {
		return p
	}
	if s > uintptr(m.reserved) {
		return 0
	}
	k, ok := m.treeCeil(tags.TreapKey(s, 0))
	if !ok {
		return 0
	}
	return link(k).Offset()
}

// insert adds the free block at p, of size s, to the index.
func (m *midZone) insert(p offset, s uintptr) {
	m.freeBlocks++
	m.freeBytes += int64(s)
	if s < binMax {
		m.idx.bins.Insert(m.base, p, s)
		return
	}
	m.treeInsert(tags.TreapKey(s, p.Link()))
}

// remove takes the free block at p, of size s, out of the index.
func (m *midZone) remove(p offset, s uintptr) {
	m.freeBlocks--
	m.freeBytes -= int64(s)
	if s < binMax {
		m.idx.bins.Remove(m.base, p, s)
		return
	}
	m.treeRemove(tags.TreapKey(s, p.Link()))
}

// replace puts the free block at r, of size rs, in the place of the block
// at p, of size s, which it is the remainder of.
func (m *midZone) replace(p offset, s uintptr, r offset, rs uintptr) {
	m.remove(p, s)
	m.insert(r, rs)
}

// largest returns the size of the largest free block.
func (m *midZone) largest() uintptr {
	if k, ok := m.treeLast(); ok {
		return uintptr(k>>32) << granShift
	}
	return m.idx.bins.Largest()
}

// treap is an ordered set of free blocks, threaded through them: a node is
// a free block of at least binMax bytes, its two links its left and right
// children, its key read from its header (see tags.TreapKey).
type treap struct {
	root link
	n    int // nodes
}

// key returns the key of the free block l, from its header.
func (m *midZone) key(l link) uint64 { return tags.TreapKey(m.hdr(l.Offset()).Size(), l) }

// kids returns the children of node l: its links.
func (m *midZone) kids(l link) *[2]link { return m.links(l.Offset()) }

// treeInsert adds the free block of key k, not in the tree, whose header
// holds its size. The new node goes where its priority puts it: in place
// of the first node on k's search path with a lower priority, whose
// subtree k splits into the new node's two children.
func (m *midZone) treeInsert(k uint64) {
	t := &m.idx.tree
	n := link(k)
	t.n++
	pk := tags.Prio(k)
	slot := &t.root
	for *slot != 0 && tags.Prio(uint64(*slot)) > pk {
		x := *slot
		if k < m.key(x) {
			slot = &m.kids(x)[0]
		} else {
			slot = &m.kids(x)[1]
		}
	}
	kids := m.kids(n)
	l, r := &kids[0], &kids[1]
	for cur := *slot; cur != 0; {
		if m.key(cur) < k {
			*l, l, cur = cur, &m.kids(cur)[1], m.kids(cur)[1]
		} else {
			*r, r, cur = cur, &m.kids(cur)[0], m.kids(cur)[0]
		}
	}
	*l, *r = 0, 0
	*slot = n
}

// treeRemove deletes the block of key k, which the tree holds: its
// children, merged, take its place.
func (m *midZone) treeRemove(k uint64) {
	t := &m.idx.tree
	slot := &t.root
	for {
		x := *slot
		if x == 0 {
			panic("heap: best fit: a free block is missing from the tree")
		}
		if x == link(k) {
			break
		}
		if k < m.key(x) {
			slot = &m.kids(x)[0]
		} else {
			slot = &m.kids(x)[1]
		}
	}
	a, b := m.kids(*slot)[0], m.kids(*slot)[1]
	for {
		switch {
		case a == 0:
			*slot = b
		case b == 0:
			*slot = a
		case tags.Prio(uint64(a)) > tags.Prio(uint64(b)):
			*slot, slot, a = a, &m.kids(a)[1], m.kids(a)[1]
			continue
		default:
			*slot, slot, b = b, &m.kids(b)[0], m.kids(b)[0]
			continue
		}
		break
	}
	t.n--
}

// treeCeil returns the least key at or above k.
func (m *midZone) treeCeil(k uint64) (uint64, bool) {
	var best uint64
	found := false
	for x := m.idx.tree.root; x != 0; {
		if xk := m.key(x); xk >= k {
			best, found = xk, true
			x = m.kids(x)[0]
		} else {
			x = m.kids(x)[1]
		}
	}
	return best, found
}

// treeLast returns the greatest key.
func (m *midZone) treeLast() (uint64, bool) {
	x := m.idx.tree.root
	if x == 0 {
		return 0, false
	}
	for m.kids(x)[1] != 0 {
		x = m.kids(x)[1]
	}
	return m.key(x), true
}
