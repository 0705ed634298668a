package buddy

import (
	"fmt"
	"math/bits"
	"unsafe"
)

// This file holds the building block of the heap's side tables: a sparse
// set of bits, allocated where bits have been set and nowhere else.
//
// A heap of 1 GiB with 16-byte blocks has 2^26 nodes at its lowest order
// alone; a dense bit per node would cost 8 MiB of Go memory before the
// first allocation. The bits live instead in leaves of leafBits bits,
// allocated the first time one of their bits is set and kept afterwards,
// so the tables grow with the address range the heap has used.

const (
	leafBits  = 1024 // bits per leaf: 128 bytes of words
	leafWords = leafBits / 64
)

// leaf holds bits [j*leafBits, (j+1)*leafBits) of a bitset, and how many
// of them are set.
type leaf struct {
	w [leafWords]uint64
	n int
}

// bitset is a set of non-negative integers (node indexes of one order, or
// slot indexes). The zero value is the empty set.
//
//	n == sum of leaves[j].n == popcount of all leaves
//	nonempty bit j set  <=>  leaves[j] != nil && leaves[j].n > 0
//	every word of nonempty below low is zero
type bitset struct {
	leaves   []*leaf  // leaves[j]: bits [j*leafBits, (j+1)*leafBits); nil until one is set
	nonempty []uint64 // bit j set: leaves[j] holds a set bit
	low      int      // where first starts its scan of nonempty
	n        int      // bits set
	nleaves  int      // leaves allocated
}

// has reports whether i is in the set. It allocates nothing and is small
// enough to inline.
func (s *bitset) has(i uint) bool {
	j := i / leafBits
	if j >= uint(len(s.leaves)) {
		return false
	}
	l := s.leaves[j]
	return l != nil && l.w[i/64%leafWords]&(1<<(i%64)) != 0
}

// set adds i, which must not be in the set.
func (s *bitset) set(i uint) {
	l := s.leafFor(i / leafBits)
	l.w[i/64%leafWords] |= 1 << (i % 64)
	l.n++
	s.n++
	if l.n == 1 {
		s.markNonempty(i / leafBits)
	}
}

// clear removes i, which must be in the set.
func (s *bitset) clear(i uint) {
	j := i / leafBits
	l := s.leaves[j]
	l.w[i/64%leafWords] &^= 1 << (i % 64)
	l.n--
	s.n--
	if l.n == 0 {
		s.nonempty[j/64] &^= 1 << (j % 64)
	}
}

// remove clears i if it is in the set, and reports whether it was: a
// test and a clear for the price of one lookup.
func (s *bitset) remove(i uint) bool {
	j := i / leafBits
	if j >= uint(len(s.leaves)) {
		return false
	}
	l := s.leaves[j]
	if l == nil {
		return false
	}
	w, m := &l.w[i/64%leafWords], uint64(1)<<(i%64)
	if *w&m == 0 {
		return false
	}
	*w &^= m
	l.n--
	s.n--
	if l.n == 0 {
		s.nonempty[j/64] &^= 1 << (j % 64)
	}
	return true
}

// first returns the least element. The set must not be empty.
//
// It scans nonempty from low, one word per 64 leaves, then the leaf's
// words: amortized over the calls, the scan of nonempty costs one word per
// word that became empty since (low only moves down when a lower bit is
// set).
func (s *bitset) first() uint {
	for s.nonempty[s.low] == 0 {
		s.low++
	}
	j := uint(s.low)*64 + uint(bits.TrailingZeros64(s.nonempty[s.low]))
	l := s.leaves[j]
	for w, x := range l.w {
		if x != 0 {
			return j*leafBits + uint(w)*64 + uint(bits.TrailingZeros64(x))
		}
	}
	panic("buddy: bitset leaf counted as non-empty holds no bit")
}

// leafFor returns leaf j, growing the directory and allocating the leaf if
// needed.
func (s *bitset) leafFor(j uint) *leaf {
	if j >= uint(len(s.leaves)) {
		s.leaves = append(s.leaves, make([]*leaf, int(j)+1-len(s.leaves))...)
		if words := (len(s.leaves) + 63) / 64; words > len(s.nonempty) {
			s.nonempty = append(s.nonempty, make([]uint64, words-len(s.nonempty))...)
		}
	}
	l := s.leaves[j]
	if l == nil {
		l = new(leaf)
		s.leaves[j] = l
		s.nleaves++
	}
	return l
}

func (s *bitset) markNonempty(j uint) {
	s.nonempty[j/64] |= 1 << (j % 64)
	if w := int(j / 64); w < s.low {
		s.low = w
	}
}

// setRange adds every integer of [lo, hi) (some may be in the set
// already), a word at a time.
func (s *bitset) setRange(lo, hi uint) {
	for lo < hi {
		j := lo / leafBits
		end := min(hi, (j+1)*leafBits)
		l := s.leafFor(j)
		was := l.n
		for lo < end {
			w, b := lo/64%leafWords, lo%64
			m := span64(b, min(64-b, end-lo))
			added := bits.OnesCount64(m &^ l.w[w])
			l.w[w] |= m
			l.n += added
			s.n += added
			lo += min(64-b, end-lo)
		}
		if was == 0 && l.n > 0 {
			s.markNonempty(j)
		}
	}
}

// clearRange removes every integer of [lo, hi) from the set, a word at a
// time; leaves never allocated are skipped.
func (s *bitset) clearRange(lo, hi uint) {
	hi = min(hi, uint(len(s.leaves))*leafBits)
	for lo < hi {
		j := lo / leafBits
		end := min(hi, (j+1)*leafBits)
		if l := s.leaves[j]; l != nil && l.n > 0 {
			for i := lo; i < end; {
				w, b := i/64%leafWords, i%64
				m := span64(b, min(64-b, end-i))
				gone := bits.OnesCount64(m & l.w[w])
				l.w[w] &^= m
				l.n -= gone
				s.n -= gone
				i += min(64-b, end-i)
			}
			if l.n == 0 {
				s.nonempty[j/64] &^= 1 << (j % 64)
			}
		}
		lo = end
	}
}

// count returns how many integers of [lo, hi) are in the set.
func (s *bitset) count(lo, hi uint) int {
	hi = min(hi, uint(len(s.leaves))*leafBits)
	n := 0
	for lo < hi {
		j := lo / leafBits
		end := min(hi, (j+1)*leafBits)
		if l := s.leaves[j]; l != nil && l.n > 0 {
			for i := lo; i < end; {
				w, b := i/64%leafWords, i%64
				n += bits.OnesCount64(span64(b, min(64-b, end-i)) & l.w[w])
				i += min(64-b, end-i)
			}
		}
		lo = end
	}
	return n
}

// span64 returns n one bits from bit b up (b + n <= 64, n >= 1).
func span64(b, n uint) uint64 {
	if n == 64 {
		return ^uint64(0)
	}
	return (1<<n - 1) << b
}

// bytes returns the Go memory the set holds: its leaves and directories.
func (s *bitset) bytes() int64 {
	return int64(s.nleaves)*int64(unsafe.Sizeof(leaf{})) +
		int64(cap(s.leaves))*int64(unsafe.Sizeof((*leaf)(nil))) +
		int64(cap(s.nonempty))*8
}

// check verifies the set's invariants; every element must be below limit.
func (s *bitset) check(limit uint) error {
	n, nleaves := 0, 0
	for j, l := range s.leaves {
		if l == nil {
			if s.nonempty[j/64]&(1<<(j%64)) != 0 {
				return fmt.Errorf("bitset: leaf %d is nil but marked non-empty", j)
			}
			continue
		}
		nleaves++
		c := 0
		for _, x := range l.w {
			c += bits.OnesCount64(x)
		}
		if c != l.n {
			return fmt.Errorf("bitset: leaf %d holds %d bits, counts %d", j, c, l.n)
		}
		if (c > 0) != (s.nonempty[j/64]&(1<<(j%64)) != 0) {
			return fmt.Errorf("bitset: leaf %d holds %d bits, non-empty mark %t", j, c, c == 0)
		}
		n += c
	}
	if n != s.n || nleaves != s.nleaves {
		return fmt.Errorf("bitset: %d bits in %d leaves, counts %d in %d", n, nleaves, s.n, s.nleaves)
	}
	for w := range min(s.low, len(s.nonempty)) {
		if s.nonempty[w] != 0 {
			return fmt.Errorf("bitset: non-empty word %d lies below the scan start %d", w, s.low)
		}
	}
	if s.low > len(s.nonempty) || s.n > 0 && s.low >= len(s.nonempty) {
		return fmt.Errorf("bitset: scan start %d past %d words holding %d bits", s.low, len(s.nonempty), s.n)
	}
	for j := limit / leafBits; j < uint(len(s.leaves)); j++ {
		if l := s.leaves[j]; l != nil {
			for w, x := range l.w {
				if top := j*leafBits + uint(w)*64 + 63 - uint(bits.LeadingZeros64(x)); x != 0 && top >= limit {
					return fmt.Errorf("bitset: element %d at or past the limit %d", top, limit)
				}
			}
		}
	}
	return nil
}
