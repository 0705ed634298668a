package heap

import (
	"fmt"
	"math/bits"

	"github.com/carvelab/carve/internal/invariants"
	"github.com/carvelab/carve/internal/tags"
)

// This file holds the invariant checker, which the tests run after every
// step and checked builds (-tags carvecheck) run on slow paths, and what
// checked builds add: freed slots and blocks are filled with
// invariants.Poison (a best-fit block all but its header, links and
// footer), and the bytes are verified to still hold the poison when they
// are handed out again, which catches writes after free. Pages the heap
// purged read as zero, and are not verified.

// check verifies the heap's invariants and returns the first one broken.
// For the small zone:
//
//	a page is free exactly when it is no slab; a slab's nfree is the count
//	of its bitmap's set bits, 0 <= nfree <= slots, nfree == slots only for
//	a slab in the kept ring, which holds each slab marked kept once; a
//	slab is in its class's partial set exactly when nfree > 0, and the
//	class's next is 1 + the set's first member, cur where that slab's
//	bitmaps start; every bitmap is one slab's or spare, once, but that a
//	meshed page (a follower) shares its leader's, holding no nfree of its
//	own and in no set (checkFollower); inUse = sum of (slots - nfree);
//	Used sums inUse*size over the classes;
//	a slot's slack bit is set only if the slot is in use, and then its last
//	byte is below its size (the slack less 1, at most size - 1).
//
// For the best-fit zone, fit's invariants (see fit's check): the blocks
// tile [8, top-8), flags and footers agree, no two free blocks are
// adjacent, the index holds each free block once; and the first-start
// table names each page's first block.
//
// For the pages of both zones:
//
//	free = the pages the heap holds nothing on: slab-free pages; the whole
//	       pages inside free blocks (past header and links, before the
//	       footer) and of the top
//	clean ⊆ free, and no clean page is resident (mincore)
//	dirty = |free - clean| over both zones; where the heap can purge, at
//	        most the budget and each dirty page in a range of the purge
//	        ring
//	Footprint = committed - clean - meshed <= Limit
//	Live = the sum over the slots and blocks in use of what was asked of
//	       them (their usable bytes less their slack)
//
// It reads headers, footers and links, and the last byte of slots in use
// with slack, never the rest of free memory, so it cannot make pages
// resident.
func (h *Heap) check() error {
	if h.closed {
		for _, z := range h.zones() {
			if z.base != nil || z.committed != 0 || h.live != 0 {
				return fmt.Errorf("closed heap keeps memory: a zone at %p of %d bytes, live %d", z.base, z.committed, h.live)
			}
		}
		return nil
	}
	smallAsked, err := h.small.check()
	if err != nil {
		return fmt.Errorf("small zone: %w", err)
	}
	midAsked, err := h.mid.check()
	if err != nil {
		return fmt.Errorf("best-fit zone: %w", err)
	}
	dirty := 0
	for id, z := range h.zones() {
		aliased := h.small.mesh.isStale // a page let go of by unmesh reads another's memory
		if id != int(smallID) {
			aliased = func(int) bool { return false }
		}
		d, err := z.checkPages(aliased)
		if err != nil {
			return fmt.Errorf("%s: %w", []string{"small zone", "best-fit zone"}[id], err)
		}
		dirty += d
	}
	if dirty != h.dirty {
		return fmt.Errorf("%d pages dirty, the heap counts %d", dirty, h.dirty)
	}
	if canPurge() {
		if h.dirty > h.budget() && h.ring.n > 0 {
			return fmt.Errorf("%d pages dirty, more than the %d retained", h.dirty, h.budget())
		}
		if err := h.checkRing(); err != nil {
			return err
		}
	}
	fp := h.Footprint()
	used := h.small.usedBytes() + h.mid.used
	switch {
	case fp > h.limit:
		return fmt.Errorf("footprint %d above the limit %d", fp, h.limit)
	case used > fp:
		return fmt.Errorf("used %d above the footprint %d", used, fp)
	case h.live != smallAsked+midAsked:
		return fmt.Errorf("live %d, but the slots in use were asked for %d bytes and the blocks %d", h.live, smallAsked, midAsked)
	}
	return nil
}

// checkPages verifies a zone's page bitmaps against each other and the OS,
// and returns its dirty pages. A clean page must not be resident, unless
// aliased: it maps another page's memory.
func (z *zonePages) checkPages(aliased func(pg int) bool) (int, error) {
	n := z.pages()
	switch {
	case z.committed%pageSize != 0 || z.committed > z.reserved:
		return 0, fmt.Errorf("committed %d: want whole pages, at most the reservation %d", z.committed, z.reserved)
	case len(z.free.words)*64 < n || len(z.clean)*64 < n || len(z.free.summary)*64 < len(z.free.words):
		return 0, fmt.Errorf("page bitmaps of %d and %d words for %d pages", len(z.free.words), len(z.clean), n)
	}
	for i := n; i < len(z.free.words)*64; i++ {
		if z.free.words.has(i) || z.clean.has(i) {
			return 0, fmt.Errorf("page %d, past the %d committed, is marked free or clean", i, n)
		}
	}
	if err := z.free.check(); err != nil {
		return 0, fmt.Errorf("free pages: %w", err)
	}
	dirty, clean := 0, 0
	for w := range z.clean {
		c, f := z.clean[w], z.free.words[w]
		if c&^f != 0 {
			return 0, fmt.Errorf("page %d is clean but not free", w*64+bits.TrailingZeros64(c&^f))
		}
		clean += bits.OnesCount64(c)
		dirty += bits.OnesCount64(f &^ c)
	}
	if clean != z.nClean {
		return 0, fmt.Errorf("%d pages clean, the zone counts %d", clean, z.nClean)
	}
	if canPurge() && n > 0 {
		vec, err := z.vm.residentPages(0, z.committed)
		if err != nil {
			return 0, fmt.Errorf("mincore: %w", err)
		}
		for i, v := range vec {
			if v&1 != 0 && z.clean.has(i) && !aliased(i) {
				return 0, fmt.Errorf("page %d is clean, but resident", i)
			}
		}
	}
	return dirty, nil
}

// check verifies the set's summary and count.
func (s *searchSet) check() error {
	n := 0
	for w, m := range s.words {
		if (m != 0) != s.summary.has(w) {
			return fmt.Errorf("word %d is %#x, its summary bit %t", w, m, s.summary.has(w))
		}
		n += bits.OnesCount64(m)
	}
	for w := len(s.words); w < len(s.summary)*64; w++ {
		if s.summary.has(w) {
			return fmt.Errorf("summary bit %d set past the %d words", w, len(s.words))
		}
	}
	if n != s.n {
		return fmt.Errorf("%d members, counted %d", n, s.n)
	}
	return nil
}

// checkRing verifies that every dirty page lies in a range of the purge
// ring.
func (h *Heap) checkRing() error {
	r := &h.ring
	if r.n < 0 || r.n > ringSize {
		return fmt.Errorf("purge ring holds %d ranges (want 0 to %d)", r.n, ringSize)
	}
	for _, id := range []zoneID{smallID, midID} {
		z := h.zone(id)
		var covered bitset
		covered = covered.grow(z.pages())
		for i := range r.n {
			x := r.at(i)
			if x.zone != id {
				continue
			}
			for p := int(x.lo); p < min(int(x.hi), z.pages()); p++ {
				covered.set(p)
			}
		}
		for p := range z.pages() {
			if z.free.has(p) && !z.clean.has(p) && !covered.has(p) {
				return fmt.Errorf("zone %d: page %d is dirty and in no range of the purge ring", id, p)
			}
		}
	}
	return nil
}

// check verifies the small zone and returns what was asked of its slots
// in use.
func (z *smallZone) check() (asked int64, err error) {
	n := z.pages()
	if len(z.slabs) != n {
		return 0, fmt.Errorf("%d slab records for %d pages", len(z.slabs), n)
	}
	var inUse [numClasses]int64
	var slabs [numClasses]int
	var partial [numClasses]int
	owner := make([]map[uint32]int, numClasses)
	var used int64
	nSlabs, followers, stale := 0, 0, 0
	kept := map[int]bool{}
	for pg, s := range z.slabs {
		if (s.class == 0) != z.free.has(pg) {
			return 0, fmt.Errorf("page %d: slab class %d, free %t", pg, s.class, z.free.has(pg))
		}
		if z.mesh.isStale(pg) {
			if s.class != 0 || !z.clean.has(pg) {
				return 0, fmt.Errorf("page %d: let go of by unmesh, not free and clean (class %d)", pg, s.class)
			}
			stale++
		}
		if s.class == 0 {
			if s != (slab{}) { // kept included: a kept slab is a slab
				return 0, fmt.Errorf("page %d: free, its record %+v", pg, s)
			}
			continue
		}
		if s.class >= numClasses {
			return 0, fmt.Errorf("page %d: class %d", pg, s.class)
		}
		if z.follower(pg) {
			if err := z.checkFollower(pg); err != nil {
				return 0, err
			}
			followers++
			continue
		}
		c := s.class
		cl := &z.classes[c]
		if int(s.bits) >= len(cl.bits)/(2*cl.words) {
			return 0, fmt.Errorf("page %d: bitmap %d of %d", pg, s.bits, len(cl.bits)/(2*cl.words))
		}
		if owner[c] == nil {
			owner[c] = map[uint32]int{}
		}
		if o, dup := owner[c][s.bits]; dup {
			return 0, fmt.Errorf("pages %d and %d share bitmap %d of the %d-byte class", o, pg, s.bits, cl.size)
		}
		owner[c][s.bits] = pg
		w, sw := cl.bitmaps(s.bits)
		nfree := 0
		for i, m := range w {
			if (m|sw[i])&^mask(i, 0, cl.slots) != 0 {
				return 0, fmt.Errorf("page %d: bitmap word %d marks slots past the %d", pg, i, cl.slots)
			}
			if m&sw[i] != 0 {
				return 0, fmt.Errorf("page %d: slot %d is free, with slack", pg, i*64+bits.TrailingZeros64(m&sw[i]))
			}
			nfree += bits.OnesCount64(m)
			asked += int64(bits.OnesCount64(^m&mask(i, 0, cl.slots))) * int64(cl.size)
			for x := sw[i]; x != 0; x &= x - 1 {
				j := i*64 + bits.TrailingZeros64(x)
				b := *z.last(cl, offset(pg<<pageShift+j*int(cl.size)))
				if uintptr(b) >= cl.size {
					return 0, fmt.Errorf("page %d: slot %d of %d bytes has a slack of %d", pg, j, cl.size, int(b)+1)
				}
				asked -= int64(b) + 1
			}
		}
		switch {
		case nfree != int(s.nfree):
			return 0, fmt.Errorf("page %d: %d slots free, its record says %d", pg, nfree, s.nfree)
		case nfree >= cl.slots && !s.kept:
			return 0, fmt.Errorf("page %d: a slab of the %d-byte class with every slot free, not kept", pg, cl.size)
		case cl.partial.has(pg) != (nfree > 0):
			return 0, fmt.Errorf("page %d: %d slots free, in the partial set: %t", pg, nfree, cl.partial.has(pg))
		}
		if nfree > 0 {
			partial[c]++
		}
		if s.kept {
			kept[pg] = true
		}
		inUse[c] += int64(cl.slots - nfree)
		slabs[c]++
		used += int64(cl.slots-nfree) * int64(cl.size)
		nSlabs++
	}
	for c := 1; c < numClasses; c++ {
		cl := &z.classes[c]
		if err := cl.partial.check(); err != nil {
			return 0, fmt.Errorf("the %d-byte class's partial set: %w", cl.size, err)
		}
		switch {
		case cl.inUse != inUse[c] || cl.slabs != slabs[c]:
			return 0, fmt.Errorf("the %d-byte class: %d slots in %d slabs, it counts %d in %d", cl.size, inUse[c], slabs[c], cl.inUse, cl.slabs)
		case cl.partial.n != partial[c]:
			return 0, fmt.Errorf("the %d-byte class: %d partial slabs, its set holds %d", cl.size, partial[c], cl.partial.n)
		case cl.next != cl.partial.first()+1:
			return 0, fmt.Errorf("the %d-byte class: next %d, its lowest partial slab %d", cl.size, cl.next, cl.partial.first())
		case cl.next != 0 && cl.cur != int(z.slabs[cl.next-1].bits)*2*cl.words:
			return 0, fmt.Errorf("the %d-byte class: its next slab's bitmaps at %d, cur says %d", cl.size, int(z.slabs[cl.next-1].bits)*2*cl.words, cl.cur)
		case len(cl.bits)%max(2*cl.words, 1) != 0 || (cl.words > 0 && len(cl.bits)/(2*cl.words) != slabs[c]+cl.nspare):
			return 0, fmt.Errorf("the %d-byte class: %d bitmap words for %d slabs and %d spare", cl.size, len(cl.bits), slabs[c], cl.nspare)
		}
		n := 0
		for s := cl.spare; s != 0; s = uint32(cl.bits[int(s-1)*2*cl.words]) {
			i := s - 1
			if n++; n > cl.nspare || int(i) >= len(cl.bits)/max(2*cl.words, 1) {
				return 0, fmt.Errorf("the %d-byte class: the spare list passes %d bitmaps or leaves the %d there are (at %d)", cl.size, cl.nspare, len(cl.bits)/max(2*cl.words, 1), i)
			}
			if o, dup := owner[c][i]; dup {
				return 0, fmt.Errorf("the %d-byte class: bitmap %d is spare and page %d's", cl.size, i, o)
			}
			if owner[c] == nil {
				owner[c] = map[uint32]int{}
			}
			owner[c][i] = -1
		}
		if n != cl.nspare {
			return 0, fmt.Errorf("the %d-byte class: %d bitmaps on the spare list, it counts %d", cl.size, n, cl.nspare)
		}
	}
	if z.kept.n > maxKept || z.kept.n != len(kept) {
		return 0, fmt.Errorf("%d slabs kept, %d marked kept", z.kept.n, len(kept))
	}
	for i := range z.kept.n {
		pg := int(z.kept.pages[(z.kept.head+i)%maxKept])
		if !kept[pg] {
			return 0, fmt.Errorf("the kept ring holds page %d twice, or a page not marked kept", pg)
		}
		delete(kept, pg)
	}
	if used != z.usedBytes() || nSlabs != z.nSlabs {
		return 0, fmt.Errorf("%d bytes of slots in %d slabs, the zone counts %d in %d", used, nSlabs, z.usedBytes(), z.nSlabs)
	}
	if followers != z.meshedPages || followers != z.mesh.followers {
		return 0, fmt.Errorf("%d pages meshed, the zone counts %d and %d", followers, z.meshedPages, z.mesh.followers)
	}
	if stale != z.mesh.nstale {
		return 0, fmt.Errorf("%d pages let go of by unmesh, the zone counts %d", stale, z.mesh.nstale)
	}
	return asked, nil
}

// checkFollower verifies the follower at pg: its leader is a slab of its
// class and no follower, whose bitmaps it shares and whose list of
// followers holds it; it holds no count of free slots of its own, and is
// neither kept nor in the partial set.
func (z *smallZone) checkFollower(pg int) error {
	s, m := z.slabs[pg], &z.mesh
	l := int(m.leaderOf[int32(pg)]) - 1
	if l < 0 || l >= len(z.slabs) || l == pg {
		return fmt.Errorf("page %d: a follower of page %d", pg, l)
	}
	ls := z.slabs[l]
	switch {
	case ls.class != s.class || ls.bits != s.bits || m.leaderOf[int32(l)] != 0:
		return fmt.Errorf("page %d: a follower (class %d, bitmap %d) of page %d (class %d, bitmap %d, itself a follower of %d)", pg, s.class, s.bits, l, ls.class, ls.bits, int(m.leaderOf[int32(l)])-1)
	case s.nfree != 0 || s.kept || z.classes[s.class].partial.has(pg):
		return fmt.Errorf("page %d: a follower with %d slots free of its own, kept %t, partial %t", pg, s.nfree, s.kept, z.classes[s.class].partial.has(pg))
	}
	for f, n := int(m.link[int32(l)])-1, 0; ; f, n = int(m.link[int32(f)])-1, n+1 {
		switch {
		case f == pg:
			return nil
		case f < 0 || f >= len(z.slabs) || n > len(z.slabs):
			return fmt.Errorf("page %d: a follower of page %d, not in its list", pg, l)
		}
	}
}

// check verifies the best-fit zone and returns what was asked of its
// blocks in use.
func (m *midZone) check() (asked int64, err error) {
	ps := offset(pageSize)
	switch {
	case m.top < firstBlock || m.top%granule != 0 || m.top > firstBlock && int64(m.top-headerSize) > m.committed:
		return 0, fmt.Errorf("top at %d: want a multiple of %d from %d, its start (top-8) at most committed %d", m.top, granule, firstBlock, m.committed)
	case len(m.first) != m.pages():
		return 0, fmt.Errorf("first-start table of %d pages for %d", len(m.first), m.pages())
	}
	first := make([]uint16, m.pages())
	for i := range first {
		first[i] = noStart
	}
	var want bitset
	want = want.grow(m.pages())
	mark := func(lo, hi int) {
		for i := lo; i < min(hi, m.pages()); i++ {
			want.set(i)
		}
	}
	tl, err := tags.Walk(m.base, m.top, func(p offset, hd header) error {
		if first[p/ps] == noStart {
			first[p/ps] = uint16(p % ps)
		}
		switch {
		case hd.InUse() && hd.Slack() > hd.Size()-headerSize:
			return fmt.Errorf("block at %d: %d bytes, a slack of %d", p, hd.Size(), hd.Slack())
		case hd.InUse():
			asked += int64(hd.Size() - headerSize - hd.Slack())
		case hd.Slack() != 0:
			return fmt.Errorf("free block at %d: a slack of %d", p, hd.Slack())
		default:
			mark(pageRange(p+headerSize, p+offset(hd.Size())-2*headerSize))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	used, blocks, freeBytes, frees := tl.Used, tl.Blocks, tl.FreeBytes, tl.Frees
	mark(pageRange(m.topStart(), offset(m.committed)))
	for i, f := range first {
		if m.first[i] != f {
			return 0, fmt.Errorf("page %d: first block at %d of the page, the table says %d", i, f, m.first[i])
		}
	}
	for i := range m.pages() {
		if want.has(i) != m.free.has(i) {
			return 0, fmt.Errorf("page %d: free %t, but the blocks and the top make it %t", i, m.free.has(i), want.has(i))
		}
	}
	switch {
	case used != m.used || blocks != m.blocks:
		return 0, fmt.Errorf("blocks in use: %d of %d bytes, the zone counts %d of %d", blocks, used, m.blocks, m.used)
	case int64(len(frees)) != m.freeBlocks || freeBytes != m.freeBytes:
		return 0, fmt.Errorf("free blocks: %d of %d bytes, the zone counts %d of %d", len(frees), freeBytes, m.freeBlocks, m.freeBytes)
	}
	return asked, m.checkIndex(frees)
}

// checkIndex verifies that the bins and the tree hold exactly the free
// blocks frees, once each, each where its size puts it.
func (m *midZone) checkIndex(frees []offset) error {
	seen := tags.NewSeen(frees)
	visit := seen.Visit
	if err := m.idx.bins.Check(m.base, visit); err != nil {
		return err
	}
	if err := m.checkTreap(visit, len(frees)); err != nil {
		return err
	}
	if p, ok := seen.Missing(); ok {
		return fmt.Errorf("free block at %d is missing from the index", p)
	}
	return nil
}

// checkTreap verifies the tree: keys in order, each node's priority below
// its parent's, each key a free block of at least binMax bytes, the count
// right.
func (m *midZone) checkTreap(visit func(link, string) error, frees int) error {
	var (
		walk  func(x link, lo, hi uint64, pmax uint32, root bool) error
		count int
	)
	walk = func(x link, lo, hi uint64, pmax uint32, root bool) error {
		if x == 0 {
			return nil
		}
		if count++; count > frees {
			return fmt.Errorf("tree: more nodes than the %d free blocks (a cycle?)", frees)
		}
		if err := visit(x, "tree"); err != nil {
			return err
		}
		k := m.key(x)
		switch s := m.hdr(x.Offset()).Size(); {
		case s < binMax:
			return fmt.Errorf("tree: the block at %d has %d bytes, under %d", x.Offset(), s, binMax)
		case !root && tags.Prio(k) >= pmax:
			return fmt.Errorf("tree: block at %d has a priority above its parent's", x.Offset())
		case k <= lo && lo != 0 || k >= hi:
			return fmt.Errorf("tree: block at %d (%d bytes) out of order", x.Offset(), s)
		}
		kids := m.kids(x)
		if err := walk(kids[0], lo, k, tags.Prio(k), false); err != nil {
			return err
		}
		return walk(kids[1], k, hi, tags.Prio(k), false)
	}
	if err := walk(m.idx.tree.root, 0, ^uint64(0), 0, true); err != nil {
		return err
	}
	if count != m.idx.tree.n {
		return fmt.Errorf("tree: %d nodes reachable, counts %d", count, m.idx.tree.n)
	}
	return nil
}

// mustCheck runs check and panics if an invariant is broken: in checked
// builds a broken heap must stop the program before it hands out
// overlapping memory.
func (h *Heap) mustCheck() {
	if err := h.check(); err != nil {
		panic("heap: invariant broken: " + err.Error())
	}
}

// checkSlow runs the checker, in checked builds, on the 1st, 2nd, 4th,
// 8th... call from a slow path (a zone committing, a Trim): its cost,
// O(heap) each time, stays within a constant factor of the work that
// built the heap.
func (h *Heap) checkSlow() {
	if !invariants.Enabled {
		return
	}
	if h.slowCalls++; h.slowCalls&(h.slowCalls-1) == 0 {
		h.mustCheck()
	}
}

// poison fills freed bytes with invariants.Poison (checked builds only).
func poison(b []byte) {
	for i := range b {
		b[i] = invariants.Poison
	}
}

// poisonFree fills the bytes [lo, hi) of the zone with poison, but for
// its clean pages, which must stay untouched (checked builds only).
func (m *midZone) poisonFree(lo, hi offset) {
	for lo < hi {
		end := min(lo&^(pageSize-1)+pageSize, hi)
		if !m.clean.has(int(lo >> pageShift)) {
			poison(m.bytes(lo, int(end-lo)))
		}
		lo = end
	}
}

// verifyPoison panics, in checked builds, if bytes of the free block at p
// (size s) that the block [q-8, q-8+n) is about to take no longer hold the
// poison: all but its header, its links ([p, p+8)) and its footer, and
// but its clean pages, which read as zero.
func (m *midZone) verifyPoison(p offset, s uintptr, q offset, n uintptr) {
	lo := max(q, p+headerSize)
	hi := min(q-headerSize+offset(n), p+offset(s)-2*headerSize)
	for i := lo; i < hi; i++ {
		if m.clean.has(int(i >> pageShift)) {
			i |= pageSize - 1
			continue
		}
		if c := m.bytes(i, 1)[0]; c != invariants.Poison {
			panic(fmt.Sprintf("heap: byte at offset %d of the best-fit zone, in the free block at %d (%d bytes), is %#x, want poison %#x: written after free",
				i, p, s, c, invariants.Poison))
		}
	}
}

// verifySlot panics, in checked builds, if the slot b no longer holds the
// poison it was freed with.
func verifySlot(b []byte, off offset) {
	for i, c := range b {
		if c != invariants.Poison {
			panic(fmt.Sprintf("heap: byte %d of the slot at offset %d of the small zone is %#x, want poison %#x: written after free",
				i, off, c, invariants.Poison))
		}
	}
}

// enter marks the heap busy for one call of a checked build: it returns
// an error wrapping ErrBusy, and the call must change nothing, if another
// goroutine's call is running.
func (h *Heap) enter() error {
	if !h.busy.Enter() {
		return fmt.Errorf("%w: a call found another one running (a Heap is not safe for concurrent use)", ErrBusy)
	}
	return nil
}

// leave marks the heap idle again after enter.
func (h *Heap) leave() { h.busy.Leave() }

// mustEnter is enter for the calls that return no error (Stats, Map): a
// checked build panics rather than read a heap another goroutine changes.
func (h *Heap) mustEnter() {
	if err := h.enter(); err != nil {
		panic(err)
	}
}
