package lockfree

// This file holds the lock-free stack of free chunks: the packed head
// word, pop, and push.
//
// # The ABA problem
//
// A bare compare-and-swap stack pops by reading the head A, reading A's
// link B, and swapping the head from A to B. Between the read of the link
// and the swap, other goroutines may pop A, pop B, and push A back: the
// head is A again, the swap succeeds, and it installs B, which another
// goroutine now holds, as the first free chunk. B is handed out twice.
// The head's value came back, but the list behind it did not.
//
// # The head word
//
// The head therefore packs two fields into one 64-bit word, swapped
// together:
//
//	bits 63..32  version: incremented by every successful swap (pop or push)
//	bits 31..0   index of the first free chunk, or nilIndex if none
//
// In the interleaving above, the stalled pop read (A, v); the two pops and
// the push that follow leave (A, v+3), and its swap fails. It fails after
// any change at all to the list, since every change is a swap of the head.
//
// The version wraps after 2^32 swaps. A stalled pop goes wrong only if, by
// the time it resumes, exactly a multiple of 2^32 swaps have happened and
// the same chunk is on top again. At 10^8 swaps per second, more than the
// development machine manages (a pair, two swaps, takes 25 ns on one core,
// and more cores only contend for the one word), 2^32 swaps take 43
// seconds: the goroutine must stall between two adjacent instructions for
// that long (a time slice is 10 ms) and resume in the window of a few
// nanoseconds that brings the count to the exact multiple. That is safe
// enough. A 40/24 split would allow 2^40
// chunks but wrap after 2^24 swaps, 0.17 seconds, within reach of a
// goroutine descheduled on a loaded machine; 32 bits of index, MaxChunks,
// is 256 GiB of 64-byte chunks, more than one pool of one size needs.
//
// # Reading links
//
// A pop reads the link of the head chunk A before its swap, and by then
// another goroutine may have popped A: the link is in a chunk that belongs
// to someone else, and may be rewritten at that moment by a push of A (in
// checked builds also by the marks check.go keeps). The pop's swap then
// fails, since the head's version moved, and the stale link is never used;
// but the read itself races with the write, so links are read and written
// only with atomic loads and stores. And they live in a side table rather
// than in the chunks: the new owner of A writes A's bytes with ordinary
// stores, and an atomic load of a word that another goroutine writes with
// an ordinary store is still a data race, one the race detector reports: a
// prototype with the links inside the chunks, read atomically, was
// reported within a second of two goroutines churning over Go memory.
// With the side table, the pool never touches a chunk's bytes.

// headWord is the packed head of a free list: a chunk index and the
// list's version.
type headWord uint64

// pack returns the head word of index i at version v.
func pack(i index, v uint32) headWord { return headWord(v)<<32 | headWord(i) }

// index returns the first free chunk, or nilIndex.
func (h headWord) index() index { return index(h) }

// version returns how many swaps the head has seen, modulo 2^32.
func (h headWord) version() uint32 { return uint32(h >> 32) }

// to returns the head word that replaces h when the first free chunk
// becomes i: the next version.
func (h headWord) to(i index) headWord { return pack(i, h.version()+1) }

// pop takes the first chunk off the free list, or returns nilIndex if
// there is none.
func (p *Pool) pop() index {
	for {
		old := headWord(p.head.Load())
		i := old.index()
		if i == nilIndex {
			return nilIndex
		}
		// Possibly stale: another goroutine may own i by now (see the file
		// comment). Then the swap below fails.
		next := index(p.links[i].Load())
		if p.hook != nil {
			p.hook()
		}
		if p.head.CompareAndSwap(uint64(old), uint64(old.to(next))) {
			return i
		}
	}
}

// popN takes up to len(dst) chunks off the free list with one swap and
// returns how many it took. It walks the links from the head and swaps the
// head past the last chunk taken. The walk is valid if the swap succeeds:
// the version did not move, so no chunk left or joined the list while the
// walk read it, and the links of chunks on the list change only when they
// leave it. After a failed swap it tries again with half as many, so that
// a long walk does not starve under contention.
func (p *Pool) popN(dst []index) int {
	for {
		old := headWord(p.head.Load())
		i := old.index()
		if i == nilIndex {
			return 0
		}
		n := 0
		for n < len(dst) && uint64(i) < uint64(len(p.links)) {
			dst[n] = i
			n++
			i = index(p.links[i].Load()) // possibly stale, as in pop
		}
		if p.hook != nil {
			p.hook()
		}
		if p.head.CompareAndSwap(uint64(old), uint64(old.to(i))) {
			return n
		}
		dst = dst[:max(1, len(dst)/2)]
	}
}

// push puts chunk i, which the caller owns, on the free list.
func (p *Pool) push(i index) { p.pushChain(i, i) }

// pushChain puts the chain of chunks from first to last, linked through
// the side table and owned by the caller, on the free list with one swap.
func (p *Pool) pushChain(first, last index) {
	for {
		old := headWord(p.head.Load())
		// No one reads last's link until the swap publishes it, but a
		// stale pop may: hence the atomic store. An atomic store is a
		// locked instruction on amd64, as dear as the swap; skip it when
		// the link holds the value already, as it does when a chunk goes
		// back on the list just after it came off (pops do not write
		// links).
		if l := uint32(old.index()); p.links[last].Load() != l {
			p.links[last].Store(l)
		}
		if p.head.CompareAndSwap(uint64(old), uint64(old.to(first))) {
			return
		}
	}
}

// pushAll links the chunks of free, which the caller owns, into a chain in
// order and puts it on the free list with one swap.
func (p *Pool) pushAll(free []index) {
	if len(free) == 0 {
		return
	}
	if checked {
		for _, i := range free {
			if index(p.links[i].Load()) == newMark {
				poison(p.bytes(i)) // on the list, every chunk is checked for it
			}
		}
	}
	for k := 1; k < len(free); k++ {
		p.links[free[k-1]].Store(uint32(free[k]))
	}
	p.pushChain(free[0], free[len(free)-1])
}
