package invariants

import "sync/atomic"

// Busy marks a structure that one goroutine at a time may use while a
// call runs in it, so that a checked build can refuse a second goroutine
// instead of letting the two corrupt it: the call that finds it busy
// changes nothing. The mark costs a compare-and-swap per call; release
// builds skip it. The zero Busy is idle.
type Busy struct{ b atomic.Bool }

// Enter marks the structure busy and reports whether it was idle; a
// caller that gets false must not touch the structure (nor Leave).
func (b *Busy) Enter() bool { return b.b.CompareAndSwap(false, true) }

// Leave marks the structure idle again.
func (b *Busy) Leave() { b.b.Store(false) }
