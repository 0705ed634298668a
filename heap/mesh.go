package heap

import (
	"fmt"
	"math"
	"math/bits"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/carvelab/carve/internal/invariants"
)

// This file holds meshing (the Mesh option): compaction of the small
// zone without moving any slot's address, after Powers, Tench, Berger and
// McGregor, "Mesh: Compacting Memory Management for C/C++ Applications"
// (PLDI 2019).
//
// Two slabs of one class whose slots in use do not overlap hold, between
// them, no more than one page's slots. The heap copies the slots in use
// of one, the source, into the same offsets of the other's page, the
// destination, maps the source's page of the reservation onto the
// destination's page of the zone's memory file (remap: mmap MAP_FIXED of
// the file's offset), and punches the source's own page of the file out:
// a page of memory goes back to the OS, and every address still reads
// and writes the bytes it did. The source becomes a follower of the
// destination, its leader: its record shares the leader's bitmaps, so a
// free through either page lands in the one slab; the leader takes its
// slots for new requests, and keeps any number of followers, each a page
// of the reservation onto its page of the file. A follower is never a
// source; a leader may be, its followers following its slots.
//
// When a leader's slab leaves its class (empty, and not kept), its
// followers' pages become free and clean, still mapped onto the leader's
// page of the file: the zone maps such a page back onto its own page of
// the file, a hole that reads as zero, only when it takes it again for a
// slab (restore), or when Trim runs, or when the process's followers
// reach meshBound. A heap emptying for good makes no system call for
// them.
//
// Candidates are found as the paper finds them, by random probing with a
// bound on the probes (meshClass): each of a class's slabs with free
// slots, in a random order, is tried against a few of the others picked
// at random. Trim does so for every class, in rounds while they find
// meshes (a round meshes the groups the last one made); on the way, a
// class is meshed when freed finds it due. A source may lead followers of
// its own: they follow its slots onto the destination's page, so a page
// of memory backs any number of pages of the reservation (pairs alone
// would stop at about half). Of two groups that mesh, the smaller moves:
// a page is mapped anew only when its group at least doubles. Slots are
// handed out at random among a slab's free ones, not the lowest: the
// paper's bound on how often two slabs mesh assumes random placement, and
// the lowest-slot rule packs every slab's live slots at its start, where
// no two are disjoint.
//
// The contract:
//   - no slot's address changes;
//   - a mesh copies slots while no one may write them: the heap is not
//     safe for concurrent use anyway, and Shared does not mesh (Go owns
//     SIGSEGV, so Mesh's write barrier, which write-protects the source
//     while it is copied, cannot be built);
//   - a mesh costs a copy of the source's slots in use, an mmap and a
//     fallocate; each splits the reservation's mapping, so the heaps of a
//     process keep at most meshBound followers (and pages let go of, not
//     yet mapped back) between them, a quarter of the kernel's
//     vm.max_map_count; an mmap the kernel refuses leaves the heap as it
//     was;
//   - a slot of a meshed slab has one address per page of its group, and
//     all of them free it: a Free through another page of the group
//     than the one the block was handed out at, at the offset of a slot
//     in use, frees that slot where a heap that does not mesh would
//     refuse it (no block starts there), and no build can tell the two
//     apart;
//   - the zone's memory is MAP_SHARED: a forked child shares it with the
//     parent, without copy-on-write;
//   - RSS and mincore count a leader's page once per page of the
//     reservation that maps it, so they show no saving: Stats' Resident
//     counts the memory file's pages once (its allocated blocks);
//   - off Linux, and in builds tagged carvegomem, the heap does not mesh.

// On the way (freed), a class is meshed once its slots were freed a
// quarter as many times as it has slabs with free slots, and at least
// every[c] times (from meshEvery to maxEvery); each source tries
// passProbes destinations, a pass probes at most probesPerFree times per
// free since the class's last and makes at most passMeshes meshes, so
// that no Free pauses for more than a few meshes' system calls. It is so
// only while the heap's footprint is at least meshSparse times its live
// bytes. Trim tries trimProbes per source, with no bound on the meshes.
const (
	meshEvery  = 64
	maxEvery   = 1 << 16
	passProbes = 32
	passMeshes = 16
	trimProbes = 64
	meshSparse = 2
	// A pass probes at most probesPerFree times per free since the
	// class's last, and runs only when a probe finds a partner with a
	// chance of at least minChance, as meshChance estimates it (at 1%, a
	// source's passProbes probes find one about a quarter of the time).
	probesPerFree = 16
	minChance     = 0.01
)

// meshState is what the small zone keeps for meshing, when it meshes.
type meshState struct {
	on bool
	// leaderOf[pg] is 1 + the page of the leader of the follower at pg;
	// link[pg], for a leader, 1 + its first follower, and for a follower
	// 1 + the next of its leader's. Pages that are neither have no entry
	// (0): the maps cost memory for the meshed pages only.
	leaderOf, link map[int32]int32
	followers      int               // follower pages: pages given back by meshing
	meshes         int64             // meshes made
	unmeshed       int64             // followers let go of when their slab left its class
	refused        int64             // system calls of meshing the kernel refused (mmap, fallocate)
	frees          [numClasses]int   // frees of each class's slots since its last pass
	every          [numClasses]int   // the fewest frees between a class's passes (see freed)
	inUseAt        [numClasses]int64 // the class's slots in use at its last pass
	emptied        [numClasses]bool  // a slab of the class emptied since its last pass was due
	pages          []int32           // meshClass's list of candidates, kept for the next
	stale          bitset            // free pages unmesh let go of, still mapped onto another's page of the file
	nstale         int               // pages in stale
	rng            uint64            // the state of the random slot choice and probes
}

// Meshing reports whether the heap meshes: made with Mesh, on a platform
// where it can (Linux, builds not tagged carvegomem).
func (h *Heap) Meshing() bool { return h.small.mesh.on }

// meshSeed starts every heap's random numbers alike, so that a replay
// meshes the same way every time.
const meshSeed = 0x9E3779B97F4A7C15

// meshed is every heap's followers in the process, held below meshBound.
var meshed atomic.Int64

// meshBound is how many followers the heaps of a process may keep between
// them: each splits a mapping in up to three, and the kernel refuses
// mappings past vm.max_map_count (65,530 by default); a quarter of it
// leaves the rest to the program.
var meshBound = sync.OnceValue(func() int64 {
	n := int64(65530)
	if b, err := os.ReadFile("/proc/sys/vm/max_map_count"); err == nil {
		if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && v > 0 {
			n = v
		}
	}
	return n / 4
})

// random returns the next of the zone's random numbers (xorshift64*).
func (m *meshState) random() uint64 {
	x := m.rng
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	m.rng = x
	return x * 2685821657736338717
}

// set sets entry pg of map r to v, deleting it for 0.
func set(r map[int32]int32, pg int, v int32) {
	if v == 0 {
		delete(r, int32(pg))
	} else {
		r[int32(pg)] = v
	}
}

// mapEntryBytes is what an entry of a map of int32 to int32 costs, about:
// its key and value, its control byte, and the slack of groups filled to
// 7/8, rounded up.
const mapEntryBytes = 16

// bytes returns the Go memory meshing holds.
func (m *meshState) bytes() int64 {
	return int64(len(m.leaderOf)+len(m.link))*mapEntryBytes + int64(cap(m.pages))*4 + int64(cap(m.stale))*8
}

// randomSlot returns a free slot of the slab whose bitmaps start at base
// in class cl, picked at random, and takes it off the free bitmap: the
// first free slot at or after a random one, in a word picked at random
// (the next with a free slot if it has none). A free slot after a run of
// slots in use is so picked a little more often than one after a free
// slot, which packs a slab's slots in use into runs: two slabs' runs at
// random offsets overlap no more often than slots placed one by one at
// random, which is what meshing needs; and it costs a rotate and a count
// of trailing zeros, where picking uniformly among the free slots costs
// a search of the word, and its mispredicted branches.
func (m *meshState) randomSlot(cl *class, base int) int {
	r := m.random()
	i := below(uint32(r), cl.words)
	for cl.bits[base+i] == 0 { // the slab has a free slot
		if i++; i == cl.words {
			i = 0
		}
	}
	w := cl.bits[base+i]
	start := int(r>>32) & 63
	b := (start + bits.TrailingZeros64(bits.RotateLeft64(w, -start))) & 63
	cl.bits[base+i] &^= 1 << b
	return i*64 + b
}

// below maps the random r onto [0, n) by a multiply and a shift, not a
// division: (r × n) / 2³².
func below(r uint32, n int) int { return int(uint64(r) * uint64(n) >> 32) }

// leader returns the page whose record holds the slab at pg: its leader
// if pg is a follower, else pg.
func (z *smallZone) leader(pg int) int {
	if z.mesh.followers > 0 {
		if l := z.mesh.leaderOf[int32(pg)]; l != 0 {
			return int(l - 1)
		}
	}
	return pg
}

// follower reports whether the slab at pg is meshed onto another.
func (z *smallZone) follower(pg int) bool {
	return z.mesh.followers > 0 && z.mesh.leaderOf[int32(pg)] != 0
}

// groupSize returns the pages of the reservation that the slab at pg, not
// a follower, is mapped at: its own and its followers'.
func (z *smallZone) groupSize(pg int) int {
	n := 1
	for f := z.mesh.link[int32(pg)]; f != 0; f = z.mesh.link[f-1] {
		n++
	}
	return n
}

// isLeader reports whether the slab at pg has followers.
func (z *smallZone) isLeader(pg int) bool {
	return z.mesh.followers > 0 && z.mesh.link[int32(pg)] != 0 && z.mesh.leaderOf[int32(pg)] == 0
}

// disjoint reports whether the slabs at a and b, of class cl, have no
// slot in use at the same offset.
func (z *smallZone) disjoint(cl *class, a, b int) bool {
	fa, _ := cl.bitmaps(z.slabs[a].bits)
	fb, _ := cl.bitmaps(z.slabs[b].bits)
	for i := range fa {
		if ^(fa[i]|fb[i])&mask(i, 0, cl.slots) != 0 {
			return false
		}
	}
	return true
}

// canSource reports whether the slab at pg may be meshed onto another: a
// slab with slots in use and free, not a follower, not kept.
func (z *smallZone) canSource(pg int) bool {
	s := &z.slabs[pg]
	if s.class == 0 || s.kept || z.follower(pg) {
		return false
	}
	cl := &z.classes[s.class]
	return cl.slots > 1 && s.nfree > 0 && int(s.nfree) < cl.slots
}

// canDest reports whether the slab at pg may take another's slots: a
// slab of class c with slots free, not a follower.
func (z *smallZone) canDest(pg int, c uint8) bool {
	s := &z.slabs[pg]
	return s.class == c && s.nfree > 0 && !z.follower(pg)
}

// meshOnto meshes the slab at src onto the one at dst, of class cl: it
// copies src's slots in use into dst's page, maps src's page of the
// reservation, and those of src's followers if src leads, onto dst's page
// of the file, and punches src's own out: src and its followers become
// dst's. It fails, leaving the heap as it was, if the kernel refuses the
// first mapping, or if the process's followers are at meshBound.
func (h *Heap) meshOnto(cl *class, dst, src int) error {
	z := &h.small
	m := &z.mesh
	if meshed.Add(1) > meshBound() && m.nstale > 0 {
		// Pages let go of by unmesh still split the mapping: map them
		// back, making room.
		meshed.Add(-1)
		if err := h.restoreAll(); err != nil {
			return err
		}
		meshed.Add(1)
	}
	if meshed.Load() > meshBound() {
		meshed.Add(-1)
		return fmt.Errorf("heap: %d pages meshed in the process, the most it keeps", meshBound())
	}
	if m.leaderOf == nil {
		m.leaderOf, m.link = map[int32]int32{}, map[int32]int32{}
	}
	ds, ss := &z.slabs[dst], &z.slabs[src]
	df, dslack := cl.bitmaps(ds.bits)
	sf, sslack := cl.bitmaps(ss.bits)
	dp, sp := offset(dst)<<pageShift, offset(src)<<pageShift
	for i := range sf {
		for x := ^sf[i] & mask(i, 0, cl.slots); x != 0; x &= x - 1 {
			o := offset(i*64+bits.TrailingZeros64(x)) * offset(cl.size)
			copy(z.bytes(dp+o, int(cl.size)), z.bytes(sp+o, int(cl.size)))
		}
	}
	// src's page of the reservation, and its followers', go onto dst's
	// page of the file; only then is src's own page of the file punched.
	// A mapping the kernel refuses puts back those made.
	group := []int{src}
	for f := int(m.link[int32(src)]) - 1; f >= 0; f = int(m.link[int32(f)]) - 1 {
		group = append(group, f)
	}
	for i, g := range group {
		if err := z.vm.remap(int64(g)<<pageShift, int64(dp)); err != nil {
			for _, back := range group[:i] {
				if z.vm.remap(int64(back)<<pageShift, int64(sp)) != nil {
					panic(fmt.Sprintf("heap: page %d cannot be mapped back onto its memory after a refused mesh: %v", back, err))
				}
			}
			meshed.Add(-1)
			m.refused++
			h.repoison(cl, dst, sf)
			return fmt.Errorf("heap: map page %d onto page %d: %w", g, dst, err)
		}
	}
	if err := z.vm.punch(int64(sp), int64(sp)+pageSize); err != nil {
		// The page stays in the file, lost to it until Close; the mesh
		// stands.
		m.refused++
	}
	for _, f := range group[1:] {
		set(m.leaderOf, f, int32(dst+1))
		z.slabs[f].bits = ds.bits
	}
	// One slab now: dst's bitmaps hold both slabs' slots in use.
	for i := range df {
		df[i] &= sf[i]
		dslack[i] |= sslack[i]
	}
	cl.partial.remove(src)
	ds.nfree = 0
	for _, w := range df {
		ds.nfree += uint16(bits.OnesCount64(w))
	}
	if ds.nfree == 0 {
		cl.partial.remove(dst)
	}
	idx := ss.bits
	cl.bits[int(idx)*2*cl.words] = uint64(cl.spare)
	cl.spare = idx + 1
	cl.nspare++
	*ss = slab{class: ss.class, bits: ds.bits}
	set(m.leaderOf, src, int32(dst+1))
	last := src // src and its followers join dst's list at its head
	for m.link[int32(last)] != 0 {
		last = int(m.link[int32(last)]) - 1
	}
	set(m.link, last, m.link[int32(dst)])
	set(m.link, dst, int32(src+1))
	m.followers++
	m.meshes++
	z.meshedPages++
	cl.slabs--
	z.nSlabs--
	z.slabEvents++
	z.setNext(cl, cl.partial.first())
	return nil
}

// repoison fills again with the poison, in checked builds, the slots of
// the slab at dst that a refused mesh copied src's slots in use into (sf
// is src's free bitmap).
func (h *Heap) repoison(cl *class, dst int, sf []uint64) {
	if !invariants.Enabled {
		return
	}
	z := &h.small
	for i := range sf {
		for x := ^sf[i] & mask(i, 0, cl.slots); x != 0; x &= x - 1 {
			o := offset(dst)<<pageShift + offset(i*64+bits.TrailingZeros64(x))*offset(cl.size)
			poison(z.bytes(o, int(cl.size)))
		}
	}
}

// unmesh lets go of each follower of the leader at pg, an empty slab
// leaving its class: the followers' pages become free and clean, each
// still mapped onto the leader's page of the file until the zone takes it
// again (restore). Letting them go costs no system call: a page the zone
// never takes again (a heap emptying for good) is never mapped anew.
func (h *Heap) unmesh(pg int) {
	z := &h.small
	m := &z.mesh
	for f := int(m.link[int32(pg)]) - 1; f >= 0; f = int(m.link[int32(pg)]) - 1 {
		set(m.link, pg, m.link[int32(f)])
		set(m.link, f, 0)
		set(m.leaderOf, f, 0)
		z.slabs[f] = slab{}
		z.release(f, f+1)
		z.clean.set(f)
		z.nClean++
		z.meshedPages--
		m.followers--
		m.unmeshed++
		if len(m.stale) <= f/64 {
			m.stale = m.stale.grow(z.pages())
		}
		m.stale.set(f)
		m.nstale++
	}
}

// isStale reports whether the free page pg was let go of by unmesh and
// not yet restored.
func (m *meshState) isStale(pg int) bool {
	return m.nstale > 0 && pg/64 < len(m.stale) && m.stale.has(pg)
}

// restore maps the free page pg, let go of by unmesh, back onto its own
// page of the file, a hole that reads as zero.
func (h *Heap) restore(pg int) error {
	z := &h.small
	m := &z.mesh
	p := int64(pg) << pageShift
	if err := z.vm.remap(p, p); err != nil {
		m.refused++
		return fmt.Errorf("heap: map page %d back onto its own memory: %w", pg, err)
	}
	m.stale.clear(pg)
	m.nstale--
	meshed.Add(-1)
	return nil
}

// restoreAll restores every page unmesh let go of, and returns the first
// refusal.
func (h *Heap) restoreAll() error {
	m := &h.small.mesh
	for w := 0; m.nstale > 0 && w < len(m.stale); w++ {
		for x := m.stale[w]; x != 0; x &= x - 1 {
			if err := h.restore(w*64 + bits.TrailingZeros64(x)); err != nil {
				return err
			}
		}
	}
	return nil
}

// meshAll meshes what it finds in every class (meshClass, with
// trimProbes), and returns how many meshes it made.
func (h *Heap) meshAll() int {
	n := 0
	for c := uint8(1); c < numClasses; c++ {
		n += h.meshClass(c, trimProbes, math.MaxInt, math.MaxInt)
	}
	return n
}

// meshClass meshes what it finds in class c: each slab with slots in use
// and free, in a random order, tried against up to probes others of its
// class picked at random. It returns how many meshes it made.
func (h *Heap) meshClass(c uint8, probes, most, budget int) int {
	z := &h.small
	cl := &z.classes[c]
	if cl.slots < 2 || cl.partial.n < 2 {
		return 0
	}
	pages := z.mesh.pages[:0]
	for w, m := range cl.partial.words {
		for ; m != 0; m &= m - 1 {
			pages = append(pages, int32(w*64+bits.TrailingZeros64(m)))
		}
	}
	z.mesh.pages = pages
	for i := len(pages) - 1; i > 0; i-- {
		j := int(z.mesh.random() % uint64(i+1))
		pages[i], pages[j] = pages[j], pages[i]
	}
	n := 0
	for _, src := range pages {
		if n == most {
			break
		}
		if !z.canSource(int(src)) {
			continue
		}
		for range probes {
			if budget--; budget < 0 {
				return n
			}
			d := int(pages[z.mesh.random()%uint64(len(pages))])
			if d != int(src) && z.canDest(d, c) && z.disjoint(cl, d, int(src)) {
				// The smaller group moves: each page is mapped anew only
				// when its group at least doubles.
				from, onto := int(src), d
				if z.canSource(d) && z.groupSize(d) < z.groupSize(from) {
					from, onto = onto, from
				}
				if h.meshOnto(cl, onto, from) == nil {
					n++
				}
				break
			}
		}
	}
	return n
}

// pageAddr returns the address of the zone's page pg, for tests.
func (z *smallZone) pageAddr(pg int) unsafe.Pointer { return unsafe.Add(z.base, pg<<pageShift) }

// freed counts a free of a slot of class c, cl, and meshes the class on
// the way when it is due (see meshEvery) and a mesh can pay: while the
// heap's footprint is at least meshSparse times its live bytes, where the
// pages a mesh gives back are worth its system calls, and while two of
// the class's slabs mesh with a chance of minChance or more (meshChance),
// where probing can find them. A mesh pays only if the class does not
// soon take the meshed slabs' free slots again, or free their last: a
// class grown since its last pass (a heap on its way up, whose free
// slots its next requests take anyway) skips the pass, and it and a class
// whose meshed slab emptied (see freeSmall) double every[c], up to
// maxEvery. A class one of whose slabs emptied since its pass was last
// due skips it too: it is giving its pages back by itself (a program
// freeing most of what it holds, as at its end), and meshing its slabs
// would only move slots that are about to go.
func (m *meshState) freed(h *Heap, c uint8, cl *class) {
	f := &m.frees[c]
	if *f++; *f < max(m.every[c], meshEvery, cl.partial.n/4) {
		return
	}
	frees := *f
	*f = 0
	if meshChance(cl) < minChance || h.Footprint() < meshSparse*h.live {
		return
	}
	emptied := m.emptied[c]
	m.emptied[c] = false
	if cl.inUse > m.inUseAt[c] {
		m.inUseAt[c] = cl.inUse
		m.backOff(c)
		return
	}
	m.inUseAt[c] = cl.inUse
	if emptied {
		return
	}
	h.meshClass(c, passProbes, passMeshes, probesPerFree*frees)
}

// meshChance estimates the chance that two of class cl's slabs with free
// slots mesh: with p the share of their slots in use, placed at random,
// no slot in use in both, (1 - p²)^slots.
func meshChance(cl *class) float64 {
	full := cl.slabs - cl.partial.n // slabs with no free slot
	n := cl.partial.n * cl.slots
	if n == 0 {
		return 0
	}
	p := float64(cl.inUse-int64(full*cl.slots)) / float64(n)
	return math.Pow(1-p*p, float64(cl.slots))
}

// backOff doubles the frees between class c's passes, up to maxEvery.
func (m *meshState) backOff(c uint8) {
	m.every[c] = min(maxEvery, max(meshEvery, 2*m.every[c]))
}
