// Package replay is carve's lab: it runs an allocation trace (package
// trace) through one allocator, checks the allocator while doing so, and
// measures how far its heap grows beyond the memory the trace holds.
//
// The lab's interface belongs to the lab: Allocator is the little replay
// needs, New adapts carve's heaps to it by their fixed names (first-fit,
// next-fit, best-fit, ao-first-fit, buddy, buddy-header, sizeclass) and
// the Go heap ("go"), and WithPool puts a dedicated pool in front of one
// for the objects of one size.
//
// Run replays events in order on one locked OS thread: a multi-threaded
// recording is replayed in its recorded order. Object IDs map to live
// blocks; an event naming a dead or unknown object, or reusing a live
// one's ID, is a trace error, counted and skipped (fatal with
// Options.Strict). Live memory is kept exactly after every event,
// footprint through Allocator.Footprint after every event, and the
// allocator's full Stats at samples; see Result for what each measure
// means.
//
// While replaying, Run checks that every block has the length asked for,
// honours the alignment asked for (when the event names one), overlaps
// no live block, and keeps the bytes written into it (a pattern derived
// from the object's ID in every byte of a block of up to 64 bytes, else
// in its first and last 8) until it is freed or reallocated, and across a
// reallocation up to the smaller size. The first failure stops the
// replay with a *Violation. Not checked: that a block lies inside the
// allocator's memory (the heaps export no bounds).
package replay
