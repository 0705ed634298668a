package replay

// blockSet holds the live blocks by address, to find a new block's
// neighbours: a treap (a binary search tree kept balanced by random
// priorities), O(log n) expected per insert, delete and lookup.
type blockSet struct {
	root *node
	rnd  uint64
}

type node struct {
	addr, end   uintptr
	id          uint64
	prio        uint64
	left, right *node
}

func (s *blockSet) next() uint64 {
	// xorshift64*: priorities need only be unrelated to addresses.
	if s.rnd == 0 {
		s.rnd = 0x9E3779B97F4A7C15
	}
	s.rnd ^= s.rnd >> 12
	s.rnd ^= s.rnd << 25
	s.rnd ^= s.rnd >> 27
	return s.rnd * 2685821657736338717
}

// overlap returns a block that intersects [addr, end), if any: the one
// starting at or before addr, or the first one after it.
func (s *blockSet) overlap(addr, end uintptr) *node {
	var pred, succ *node
	for n := s.root; n != nil; {
		if n.addr <= addr {
			pred = n
			n = n.right
		} else {
			succ = n
			n = n.left
		}
	}
	if pred != nil && pred.end > addr {
		return pred
	}
	if succ != nil && succ.addr < end {
		return succ
	}
	return nil
}

func (s *blockSet) insert(addr, end uintptr, id uint64) {
	s.root = s.ins(s.root, &node{addr: addr, end: end, id: id, prio: s.next()})
}

func (s *blockSet) ins(t, n *node) *node {
	if t == nil {
		return n
	}
	if n.addr < t.addr {
		t.left = s.ins(t.left, n)
		if t.left.prio > t.prio {
			l := t.left
			t.left, l.right = l.right, t
			return l
		}
	} else {
		t.right = s.ins(t.right, n)
		if t.right.prio > t.prio {
			r := t.right
			t.right, r.left = r.left, t
			return r
		}
	}
	return t
}

// remove deletes the block at addr, if present.
func (s *blockSet) remove(addr uintptr) {
	p := &s.root
	for *p != nil && (*p).addr != addr {
		if addr < (*p).addr {
			p = &(*p).left
		} else {
			p = &(*p).right
		}
	}
	if *p != nil {
		*p = merge((*p).left, (*p).right)
	}
}

// merge joins two treaps, every key of l below every key of r.
func merge(l, r *node) *node {
	switch {
	case l == nil:
		return r
	case r == nil:
		return l
	case l.prio > r.prio:
		l.right = merge(l.right, r)
		return l
	default:
		r.left = merge(l, r.left)
		return r
	}
}
