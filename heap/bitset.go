package heap

import "math/bits"

// bitset is a set of small integers, one bit each, in Go memory.
type bitset []uint64

// grow extends s to hold n bits; new bits are clear.
func (s bitset) grow(n int) bitset {
	if w := (n + 63) / 64; w > len(s) {
		s = append(s, make([]uint64, w-len(s))...)
	}
	return s
}

func (s bitset) has(i int) bool { return s[i/64]&(1<<(i%64)) != 0 }
func (s bitset) set(i int)      { s[i/64] |= 1 << (i % 64) }
func (s bitset) clear(i int)    { s[i/64] &^= 1 << (i % 64) }

// mask returns the bits of word w that lie in [lo, hi).
func mask(w, lo, hi int) uint64 {
	m := ^uint64(0)
	if b := w * 64; lo > b {
		m <<= uint(lo - b)
	}
	if e := w*64 + 64; hi < e {
		m &= ^uint64(0) >> uint(e-hi)
	}
	return m
}

// count returns how many bits of [lo, hi) are set.
func (s bitset) count(lo, hi int) int {
	n := 0
	for w := lo / 64; w*64 < hi; w++ {
		n += bits.OnesCount64(s[w] & mask(w, lo, hi))
	}
	return n
}

// searchSet is a bitset with a summary, one bit per word that is not
// zero, so that its first member is found by reading a few words: one per
// 4096 bits of the set, rather than one per 64.
type searchSet struct {
	words   bitset
	summary bitset
	n       int // members
}

// grow makes room for members below n.
func (s *searchSet) grow(n int) {
	s.words = s.words.grow(n)
	s.summary = s.summary.grow(len(s.words))
}

func (s *searchSet) has(i int) bool { return i/64 < len(s.words) && s.words.has(i) }

func (s *searchSet) add(i int) {
	w := i / 64
	s.words[w] |= 1 << (i % 64)
	s.summary.set(w)
	s.n++
}

func (s *searchSet) remove(i int) {
	w := i / 64
	s.words[w] &^= 1 << (i % 64)
	if s.words[w] == 0 {
		s.summary.clear(w)
	}
	s.n--
}

// first returns the least member, or -1 if the set is empty.
func (s *searchSet) first() int {
	if s.n == 0 {
		return -1
	}
	for i, m := range s.summary {
		if m != 0 {
			w := i*64 + bits.TrailingZeros64(m)
			return w*64 + bits.TrailingZeros64(s.words[w])
		}
	}
	return -1
}

// bytes returns the Go memory the set holds.
func (s *searchSet) bytes() int64 { return int64(cap(s.words)+cap(s.summary)) * 8 }
