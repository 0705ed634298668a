package heap

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// MaxShards is the most shards a Shared heap takes.
const MaxShards = 256

// Shared is carve's heap for goroutines that share it: a fixed set of
// heaps (shards), each behind a lock of its own. A goroutine allocates
// from the shard its processor last used (the affinity is a sync.Pool of
// shards, which the runtime keeps per P), so goroutines that allocate at
// once take different locks; a block is freed into the shard it came
// from, found by its address, whichever goroutine frees it. Each shard
// places blocks as a Heap does, so a Shared heap packs as one Heap does on
// the part of the load each shard sees.
//
// Every method is safe for concurrent use. What is not safe is what is
// not safe with any heap: touching a block after it was freed (by any
// goroutine), freeing it twice at once (one Free returns an error
// wrapping ErrDoubleFree, the other succeeds; the block is gone for
// both), or writing one block from two goroutines without
// synchronization, which is a data race on the block as on any []byte.
// A block handed from one goroutine to another needs the same
// happens-before edge a Go value does (a channel send, a lock). Close
// waits for the calls running; later calls return ErrClosed, and every
// block is gone.
//
// The costs over a Heap: a sync.Pool Get and Put and one uncontended
// lock per Alloc; one lock and a binary search of the shards' address
// ranges per Free. Goroutines contend only when they use one shard at
// once: a free of another goroutine's block takes that block's shard's
// lock, as its owner's next Alloc does.
//
// The Limit is split evenly among the shards: each shard's Footprint is
// at most Limit/Shards, and a request the goroutine's shard cannot serve
// is tried in the others before Alloc fails with ErrExhausted, so a block
// of more than Limit/Shards bytes cannot be allocated. The Retain is
// split the same way. A Shared heap does not mesh.
type Shared struct {
	shards []shard
	spans  []span // the shards' zones, by address
	home   sync.Pool
	next   atomic.Uint32 // the shard home's next New hands out
	limit  int64
	closed atomic.Bool
}

// shard is one heap and its lock, padded so that two shards' locks do not
// share a cache line.
type shard struct {
	mu sync.Mutex
	h  *Heap
	_  [64]byte
}

// span is the address range of one zone of a shard.
type span struct {
	lo, hi uintptr
	s      *shard
}

// Shards sets how many heaps a Shared heap is made of (default
// GOMAXPROCS when NewShared runs, at most MaxShards): more shards, less
// contention between goroutines that allocate at once, and more free
// memory kept, each shard keeping its own. n must be from 1 to MaxShards.
// New refuses it.
func Shards(n int) Option {
	return Option{func(c *config) error {
		if n < 1 || n > MaxShards {
			return fmt.Errorf("%w: Shards(%d): want 1 to %d", ErrOption, n, MaxShards)
		}
		c.shards = n
		return nil
	}}
}

// NewShared returns an empty Shared heap of Shards heaps, the Limit and
// Retain split evenly among them (see Shared). It takes the options New
// takes, and Shards.
func NewShared(opts ...Option) (*Shared, error) {
	c := config{limit: DefaultLimit(), retain: DefaultRetain}
	if err := c.apply(opts); err != nil {
		return nil, err
	}
	if c.mesh {
		return nil, fmt.Errorf("%w: Mesh: a Shared heap does not mesh (a mesh copies slots another goroutine may be writing)", ErrOption)
	}
	n := c.shards
	if n == 0 {
		n = min(runtime.GOMAXPROCS(0), MaxShards)
	}
	if c.limit/int64(n) < minLimit {
		return nil, fmt.Errorf("%w: Limit(%d) over %d shards leaves each under %d bytes", ErrOption, c.limit, n, minLimit)
	}
	if !c.retainSet {
		c.retain = min(c.retain, c.limit)
	}
	s := &Shared{shards: make([]shard, n), limit: c.limit}
	for i := range s.shards {
		h, err := New(Limit(c.limit/int64(n)), Retain(c.retain/int64(n)))
		if err != nil {
			for j := range i {
				s.shards[j].h.Close()
			}
			return nil, err
		}
		s.shards[i].h = h
		for _, z := range h.zones() {
			lo, hi := z.vm.bounds()
			s.spans = append(s.spans, span{lo, hi, &s.shards[i]})
		}
	}
	// Sort the spans by address (insertion: there are at most 512).
	for i := 1; i < len(s.spans); i++ {
		for j := i; j > 0 && s.spans[j].lo < s.spans[j-1].lo; j-- {
			s.spans[j], s.spans[j-1] = s.spans[j-1], s.spans[j]
		}
	}
	s.home.New = func() any { return &s.shards[int(s.next.Add(1)-1)%len(s.shards)] }
	return s, nil
}

// Limit returns the Limit s was made with, which its shards share
// evenly, each share rounded up to whole pages (see Heap.Limit).
func (s *Shared) Limit() int64 { return s.limit }

// Shards returns how many heaps s is made of.
func (s *Shared) Shards() int { return len(s.shards) }

// Alloc returns size bytes aligned to align, as Heap.Alloc does, from the
// shard of the calling goroutine's processor, or another if that one is
// full. It fails as Heap.Alloc does; ErrExhausted when no shard can serve
// the request.
func (s *Shared) Alloc(size, align int) ([]byte, error) {
	sh, _ := s.home.Get().(*shard)
	if sh == nil {
		return nil, s.unusable()
	}
	b, err := sh.alloc(size, align)
	if err != nil && errors.Is(err, ErrExhausted) {
		b, err = s.allocElsewhere(sh, size, align, err)
	}
	s.home.Put(sh)
	return b, err
}

// allocElsewhere tries the request in each shard but full, which failed
// with err, in turn.
func (s *Shared) allocElsewhere(full *shard, size, align int, err error) ([]byte, error) {
	for i := range s.shards {
		sh := &s.shards[i]
		if sh == full {
			continue
		}
		if b, e := sh.alloc(size, align); e == nil {
			return b, nil
		}
	}
	return nil, fmt.Errorf("%w (in each of %d shards)", err, len(s.shards))
}

// Free gives the block b starts at back to its shard, from any goroutine.
// It refuses what Heap.Free refuses, changing nothing.
func (s *Shared) Free(b []byte) error {
	sh := s.owner(addr(b))
	if sh == nil {
		return s.foreign(b)
	}
	return sh.free(b)
}

// Realloc changes the size of the block b starts at, as Heap.Realloc
// does within the block's shard; when that shard is full, the block moves
// to another (its first min(len(b), size) bytes copied). It fails as
// Heap.Realloc does, the block then unchanged.
func (s *Shared) Realloc(b []byte, size int) ([]byte, error) {
	sh := s.owner(addr(b))
	if sh == nil {
		return nil, s.foreign(b)
	}
	n, err := sh.realloc(b, size)
	if err == nil || !errors.Is(err, ErrExhausted) {
		return n, err
	}
	n, err = s.allocElsewhere(sh, size, 1, err)
	if err != nil {
		return nil, err
	}
	copy(n, b[:min(len(b), size)])
	if ferr := sh.free(b); ferr != nil { // b was freed while it moved: the caller's race
		s.Free(n)
		return nil, ferr
	}
	return n, nil
}

// alloc, free and realloc make one call in the shard's heap under its
// lock. The lock is released by a defer, which costs next to nothing, so
// that a checked build's panic (a write after free found) leaves the shard
// usable by the other goroutines and by Close.
func (sh *shard) alloc(size, align int) ([]byte, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.h.Alloc(size, align)
}

func (sh *shard) free(b []byte) error {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.h.Free(b)
}

func (sh *shard) realloc(b []byte, size int) ([]byte, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.h.Realloc(b, size)
}

// UsableSize returns how many bytes the block b starts at can hold, as
// Heap.UsableSize does.
func (s *Shared) UsableSize(b []byte) (int, error) {
	sh := s.owner(addr(b))
	if sh == nil {
		return 0, s.foreign(b)
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.h.UsableSize(b)
}

// Contains reports whether the bytes of b, up to its capacity, lie wholly
// inside one shard's reservations, as Heap.Contains does.
func (s *Shared) Contains(b []byte) bool {
	if s.closed.Load() {
		return false
	}
	a := addr(b)
	i := s.span(a)
	return i >= 0 && uintptr(cap(b)) <= s.spans[i].hi-a
}

// owner returns the shard whose reservations hold address a, or nil.
func (s *Shared) owner(a uintptr) *shard {
	if i := s.span(a); i >= 0 {
		return s.spans[i].s
	}
	return nil
}

// span returns the index of the span holding address a, or -1.
func (s *Shared) span(a uintptr) int {
	lo, hi := 0, len(s.spans)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		switch sp := &s.spans[m]; {
		case a < sp.lo:
			hi = m
		case a >= sp.hi:
			lo = m + 1
		default:
			return m
		}
	}
	return -1
}

// foreign returns the error for a slice in no shard.
func (s *Shared) foreign(b []byte) error {
	switch {
	case s.shards == nil:
		return s.unusable()
	case addr(b) == 0:
		return fmt.Errorf("%w: nil", ErrForeign)
	}
	return fmt.Errorf("%w: %#x lies in none of the %d shards", ErrForeign, addr(b), len(s.shards))
}

// unusable returns the error for a Shared heap not made by NewShared.
func (s *Shared) unusable() error {
	return fmt.Errorf("%w: a Shared not made by NewShared", ErrClosed)
}

// run runs f on the shard's heap under its lock.
func (sh *shard) run(f func(h *Heap)) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	f(sh.h)
}

// each runs f on every shard's heap in turn, under its lock.
func (s *Shared) each(f func(h *Heap)) {
	for i := range s.shards {
		s.shards[i].run(f)
	}
}

// Stats returns the sum of the shards' statistics (Largest is the largest
// of their free blocks), each shard's taken under its lock in turn: a
// figure of a heap in use mixes moments.
func (s *Shared) Stats() Stats {
	var st Stats
	s.each(func(h *Heap) { st.add(h.Stats()) })
	return st
}

// Footprint returns Stats().Footprint without a system call.
func (s *Shared) Footprint() int64 {
	var n int64
	s.each(func(h *Heap) { n += h.Footprint() })
	return n
}

// Metadata returns the sum of the shards' Metadata, without a system
// call, and the bytes of s's table of their address ranges, which
// Stats().Metadata leaves out.
func (s *Shared) Metadata() int64 {
	n := int64(cap(s.spans)) * int64(unsafe.Sizeof(span{}))
	s.each(func(h *Heap) { n += h.Metadata() })
	return n
}

// Trim gives every shard's free pages back to the OS, as Heap.Trim does,
// and returns the bytes given back.
func (s *Shared) Trim() (int64, error) {
	var n int64
	var errs []error
	s.each(func(h *Heap) {
		m, err := h.Trim()
		n += m
		errs = append(errs, err)
	})
	return n, errors.Join(errs...)
}

// Close returns every shard's memory to the OS, once the calls running in
// them end. Every block becomes invalid; later calls return ErrClosed, as
// Close does on a closed Shared heap.
func (s *Shared) Close() error {
	if s.shards == nil {
		return s.unusable()
	}
	if !s.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	var errs []error
	s.each(func(h *Heap) { errs = append(errs, h.Close()) })
	return errors.Join(errs...)
}

// add adds the figures of t to st.
func (st *Stats) add(t Stats) {
	st.Live += t.Live
	st.Used += t.Used
	st.Footprint += t.Footprint
	st.Resident += t.Resident
	st.Metadata += t.Metadata
	st.Slots += t.Slots
	st.Slabs += t.Slabs
	st.SlotBytes += t.SlotBytes
	st.Kept += t.Kept
	st.Blocks += t.Blocks
	st.BlockBytes += t.BlockBytes
	st.FreeBlocks += t.FreeBlocks
	st.FreeBytes += t.FreeBytes
	st.Largest = max(st.Largest, t.Largest)
	st.HeaderBytes += t.HeaderBytes
	st.Committed += t.Committed
	st.Clean += t.Clean
	st.Dirty += t.Dirty
	st.Purges += t.Purges
	if st.Classes == nil {
		st.Classes = append([]ClassStats(nil), t.Classes...)
		return
	}
	for i, c := range t.Classes {
		if i < len(st.Classes) {
			st.Classes[i].Slots += c.Slots
			st.Classes[i].Slabs += c.Slabs
		}
	}
}
