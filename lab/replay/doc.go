// Package replay drives one allocator with one allocation trace (package
// trace), checks the allocator while doing so, and measures how far its
// heap grows beyond the memory the trace holds. See package lab for the
// lab's overview and its measures.
//
// The lab's interface belongs to the lab: Allocator is the little replay
// needs, New adapts carve's heaps and the Go heap ("go") to it by their
// fixed names, the rows of one table (Rows: each row's name, line of doc,
// look in the charts and constructor), and WithRoutes puts carve's pools, arenas or heaps
// in front of one for the requests of one size or the objects of one
// label (WithPool: a pool for one size), by one rule that a Router keeps
// for every row, the C allocators' too (route.go). BatchAllocator is
// what an allocator driven a batch of events at a time provides: the C
// allocators of package libc.
//
// Two engines share one ledger (ledger.go). Run replays events in order
// on one locked OS thread, calling the allocator for each; RunBatch hands
// them to a BatchAllocator in batches. Both hold each event to the trace's
// rules: an event naming a dead or unknown object, or reusing a live
// one's ID, is a trace error, counted and skipped (fatal with
// Options.Strict). Both keep live memory exactly after every event; Run
// reads the footprint after every event (Allocator.Footprint) and RunBatch
// at the end of each batch; both read the allocator's full figures at
// samples. See Result for what each measure means.
//
// While replaying, Run checks that every block has the length asked for,
// lies inside the allocator's memory (when the allocator is a Container,
// as carve's heaps are), honours the alignment asked for (when the event
// names one), overlaps no live block, and keeps the bytes written into it
// (a pattern derived from the object's ID in every byte of a block of up
// to 64 bytes, else in its first and last 8) until it is freed or
// reallocated, and across a reallocation up to the smaller size. The
// first failure stops the replay with a *Violation. RunBatch cannot see
// the blocks and checks none.
//
// # The Go heap's collections
//
// A Go program's trace records its collections (trace.GoCycle), and its
// frees, moved to the end of the mark that proved each object dead
// (trace.MoveFrees), make the live memory at each mark's end the marked
// heap (Result.Cycles, Result.PeakMarked). The Go heap's row collects in
// one of three ways:
//
//   - NewProgramGoHeap: where the program did. A full collection at each
//     mark's end, after the frees moved there, and nowhere else: the
//     heap then holds what the program's held, and between two the
//     garbage of the cycle, as the program's did.
//   - NewPacedGoHeap: as the program's runtime would pace a heap that
//     holds less (a what-if that moves types off the Go heap, whose
//     collections cannot stay where the program's were). A full
//     collection when the heap's objects reach the goal, set at each of
//     the program's collections: the program's marked heap less the
//     moved objects its mark found, times how far the program's heap
//     grew over its marked heap before its next mark ended (both from
//     the trace: traces.Trace.CycleHeap). The program's marked heap
//     counts what its concurrent mark allocated black, and its heap
//     stopped short of its goal where its mark ended early: the goal
//     keeps both, which the replay's own live bytes, collected at once,
//     would not. Its collections fall between the program's marks'
//     ends, where the trace proves no object dead: the lab gives the
//     baseline the frees spread over the spans where the objects died
//     (trace.FreeSpread: between the later of birth and the start of the
//     mark before, and the start of the mark that proved them dead,
//     which finds what was reachable when it started), so that a
//     collection finds dead about what the program's would have, where
//     frees at the marks' ends would keep a cycle of garbage. A what-if
//     frees every object, moved or not, at the start of the mark that
//     did not find it, the latest it can have died (the late bound:
//     trace.FreeMarkStart), or as early as the trace allows (the early
//     one): with a large type gone, its collections come far more often
//     than the program's, and where in its span an object the move
//     leaves on the Go heap died moves its peak as much as the moved
//     objects do. A saving is taken against the
//     Go heap paced by the same model, and the model's own error is the
//     paced heap's peak against the program-collected one's, on the
//     same trace.
//   - NewGoHeap: at GOGC alone, for a trace without collections (a C
//     program's, an old native trace) or another GOGC than the
//     program's.
//
// None of them has the concurrent collector's overshoot: a program
// allocates while its collector marks, and the heap then passes its goal.
package replay
