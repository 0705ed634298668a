package fit

import "github.com/carvelab/carve/internal/tags"

// This file holds best fit's index: exact-size bins for blocks under
// smallMax bytes, threaded through the free blocks (tags.Bins, shared
// with the heap's best-fit zone), and for the rest a treap in Go memory.
// It is the reference of the zone's index (heap/treap.go), whose treap is
// threaded through the free blocks instead: package heap's FuzzSameAsFit
// checks that the two place every block alike.
//
// The treap is a binary search tree on the key (size in granules, link):
// one 64-bit compare orders blocks by size, then by address. Its nodes
// live in a slice in Go memory, 16 bytes each, addressed by index: a
// search reads nothing of the heap, and the nodes of a large tree stay
// compact in the caches where the free blocks they stand for are spread
// over the whole heap. A node's priority is a hash of its link, so the
// tree is also a heap on priorities, which keeps its expected depth at
// about 2 ln n whatever the order of insertions. Insert and remove walk
// down from the root with a pointer to the slot being rewritten; there are
// no parent links and no recursion.

// smallMax is the size from which blocks go to the treap rather than a
// bin.
const smallMax = tags.BinMax

// bestFit returns the smallest free block of at least s bytes, or 0.
func (h *Heap) bestFit(s uintptr) offset {
	if p := h.idx.bins.Fit(s); p != 0 {
		return p
	}
	if s > uintptr(h.reserved) {
		return 0
	}
	k, ok := h.idx.tree.ceil(tags.TreapKey(s, 0))
	if !ok {
		return 0
	}
	return link(k).Offset()
}

func (h *Heap) bestInsert(p offset, s uintptr) {
	if s < smallMax {
		h.idx.bins.Insert(h.base, p, s)
		return
	}
	h.idx.tree.insert(tags.TreapKey(s, p.Link()))
}

func (h *Heap) bestRemove(p offset, s uintptr) {
	if s < smallMax {
		h.idx.bins.Remove(h.base, p, s)
		return
	}
	h.idx.tree.remove(tags.TreapKey(s, p.Link()))
}

func (h *Heap) bestLargest() uintptr {
	if k, ok := h.idx.tree.last(); ok {
		return uintptr(k>>32) << granShift
	}
	return h.idx.bins.Largest()
}

// treap is an ordered set of distinct keys.
type treap struct {
	nodes []tnode  // nodes[0] is unused: index 0 is none
	spare []uint32 // indexes of unused nodes
	root  uint32
	n     int // keys in the set
}

type tnode struct {
	key         uint64
	left, right uint32
}

// insert adds k, which the set does not hold. The new node goes where its
// priority puts it: in place of the first node on k's search path with a
// lower priority, whose subtree is split by k into the new node's two
// children.
func (t *treap) insert(k uint64) {
	var n uint32
	if last := len(t.spare) - 1; last >= 0 {
		n, t.spare = t.spare[last], t.spare[:last]
	} else {
		if len(t.nodes) == 0 {
			t.nodes = append(t.nodes, tnode{})
		}
		t.nodes = append(t.nodes, tnode{})
		n = uint32(len(t.nodes) - 1)
	}
	t.n++
	pk := tags.Prio(k)
	slot := &t.root
	for *slot != 0 && tags.Prio(t.nodes[*slot].key) > pk {
		x := &t.nodes[*slot]
		if k < x.key {
			slot = &x.left
		} else {
			slot = &x.right
		}
	}
	nd := &t.nodes[n]
	nd.key = k
	l, r := &nd.left, &nd.right
	for cur := *slot; cur != 0; {
		x := &t.nodes[cur]
		if x.key < k {
			*l, l, cur = cur, &x.right, x.right
		} else {
			*r, r, cur = cur, &x.left, x.left
		}
	}
	*l, *r = 0, 0
	*slot = n
}

// remove deletes k, which the set holds: its children, merged, take its
// place.
func (t *treap) remove(k uint64) {
	slot := &t.root
	for {
		x := *slot
		if x == 0 {
			panic("fit: best fit: a free block is missing from the tree")
		}
		nd := &t.nodes[x]
		if nd.key == k {
			break
		}
		if k < nd.key {
			slot = &nd.left
		} else {
			slot = &nd.right
		}
	}
	n := *slot
	a, b := t.nodes[n].left, t.nodes[n].right
	for {
		switch {
		case a == 0:
			*slot = b
		case b == 0:
			*slot = a
		case tags.Prio(t.nodes[a].key) > tags.Prio(t.nodes[b].key):
			*slot, slot, a = a, &t.nodes[a].right, t.nodes[a].right
			continue
		default:
			*slot, slot, b = b, &t.nodes[b].left, t.nodes[b].left
			continue
		}
		break
	}
	t.spare = append(t.spare, n)
	t.n--
}

// ceil returns the least key at or above k.
func (t *treap) ceil(k uint64) (uint64, bool) {
	var best uint64
	found := false
	for x := t.root; x != 0; {
		nd := &t.nodes[x]
		if nd.key >= k {
			best, found = nd.key, true
			x = nd.left
		} else {
			x = nd.right
		}
	}
	return best, found
}

// last returns the greatest key.
func (t *treap) last() (uint64, bool) {
	if t.root == 0 {
		return 0, false
	}
	x := t.root
	for t.nodes[x].right != 0 {
		x = t.nodes[x].right
	}
	return t.nodes[x].key, true
}

// bytes returns the Go memory the treap holds.
func (t *treap) bytes() int64 { return sliceBytes(t.nodes) + sliceBytes(t.spare) }
