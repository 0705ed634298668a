package trace

import (
	"io"
	"math"
	"math/bits"
)

// Summary describes a trace as a whole: what it asks of an allocator,
// before any allocator runs it. "Live" is the lab's word: the bytes
// requested and not yet freed.
type Summary struct {
	// Events counts the events, and Ops the events of each Op (indexed
	// by Op; Ops[0] is unused).
	Events int64
	Ops    [numOps]int64

	// Requested is the sum of the sizes of all allocations and of the
	// new sizes of reallocs.
	Requested uint64
	// Smallest and Largest are the sizes of the smallest and largest
	// requests (allocations and reallocs); Smallest ignores requests of
	// 0 bytes, which Zero counts.
	Smallest, Largest uint64
	Zero              int64

	// PeakLive is the most bytes live at once, first reached after event
	// number PeakAt (0-based); PeakObjects the most objects live at once.
	PeakLive    uint64
	PeakAt      int64
	PeakObjects int64
	// EndLive and EndObjects are what is live after the last event.
	EndLive    uint64
	EndObjects int64

	// Sizes is the histogram of request sizes by powers of two: Sizes[0]
	// counts requests of 0 bytes, Sizes[k] those of 2^(k-1) to 2^k - 1.
	Sizes [65]int64
	// Lifetimes is the histogram of the lifetimes of freed objects, in
	// events from the allocation to the free, by powers of two as Sizes.
	// Objects still live at the end are not in it (EndObjects counts
	// them).
	Lifetimes [65]int64

	// Trace errors, as a replayer would find them (each event is counted
	// and otherwise ignored): a Free of an ID not live, a Realloc of an ID
	// not live, an allocation of an ID already live.
	UnknownFrees, UnknownReallocs, LiveAllocs int64

	// Reader is the Reader's own count of what it read and had to make
	// of the lines that do not fit an object's life.
	Reader ReaderStats
}

// Summarize reads r to its end and describes the trace. It keeps one map
// entry per live object.
func Summarize(r *Reader) (Summary, error) {
	s, err := SummarizeFrom(r)
	s.Reader = r.Stats()
	return s, err
}

// EventSource gives events in batches: a *Reader, or a replay source.
type EventSource interface {
	Read(dst []Event) (n int, err error)
}

// SummarizeFrom is Summarize for any source of events; Summary.Reader is
// left zero.
func SummarizeFrom(r EventSource) (Summary, error) {
	var s Summary
	type obj struct {
		size uint64
		born int64
	}
	live := make(map[uint64]obj)
	var cur uint64
	batch := make([]Event, 1024)
	for {
		n, err := r.Read(batch)
		for _, e := range batch[:n] {
			at := s.Events
			s.Events++
			s.Ops[e.Op]++
			switch e.Op {
			case Alloc, Calloc, Memalign:
				s.request(e.Size)
				if old, ok := live[e.ID]; ok {
					s.LiveAllocs++
					cur -= old.size
				}
				live[e.ID] = obj{e.Size, at}
				cur += e.Size
			case Realloc:
				old, ok := live[e.ID]
				if !ok {
					s.UnknownReallocs++
					continue
				}
				s.request(e.Size)
				cur = cur - old.size + e.Size
				live[e.ID] = obj{e.Size, old.born}
			case Free:
				old, ok := live[e.ID]
				if !ok {
					s.UnknownFrees++
					continue
				}
				delete(live, e.ID)
				cur -= old.size
				s.Lifetimes[bits.Len64(uint64(at-old.born))]++
			}
			if cur > s.PeakLive {
				s.PeakLive, s.PeakAt = cur, at
			}
			if int64(len(live)) > s.PeakObjects {
				s.PeakObjects = int64(len(live))
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return s, err
		}
	}
	s.EndLive, s.EndObjects = cur, int64(len(live))
	return s, nil
}

// request counts one requested size.
func (s *Summary) request(size uint64) {
	s.Requested += size
	s.Sizes[bits.Len64(size)]++
	if size == 0 {
		s.Zero++
		return
	}
	if s.Smallest == 0 || size < s.Smallest {
		s.Smallest = size
	}
	if size > s.Largest {
		s.Largest = size
	}
}

// Robson returns Robson's bounds on the heap that the worst trace with
// this one's peak live bytes M and ratio n of largest to smallest request
// can force (J. M. Robson, "Worst case fragmentation of first fit and best
// fit storage allocation strategies", 1977), as the FREENIX paper quotes
// them: about M log2 n for first fit, about M n for best fit. They are
// the scale against which a real allocator's footprint is small. Both are
// 0 for a trace without requests.
func (s Summary) Robson() (firstFit, bestFit float64) {
	if s.Smallest == 0 {
		return 0, 0
	}
	m := float64(s.PeakLive)
	n := float64(s.Largest) / float64(s.Smallest)
	return m * math.Max(1, math.Log2(n)), m * n
}
