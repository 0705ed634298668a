package trace

// A GoCycle is one collection of a Go program's heap, as its execution
// trace records it: the range "GC concurrent mark phase" (its begin and
// end), and the heap-objects metric the runtime reports just before the
// end, with the world stopped, whose value is the bytes the mark found
// reachable (gcController.resetLive(work.bytesMarked); the third figure
// of a GODEBUG=gctrace=1 line, "283->292->236 MB"). An object the sweep
// frees after the cycle was unreachable when its mark ended.
type GoCycle struct {
	// Start and End are the positions of the mark's begin and end: the
	// number of events of the trace before each.
	Start, End int64
	// Marked is the bytes the mark found reachable.
	Marked uint64
	// Goal is the heap goal the runtime set after the mark, from Marked
	// (the goal metric that follows the end): the goal of the next
	// cycle. 0: the trace did not report it.
	Goal uint64
}
