package invariants

// Schedule spaces out the runs of an invariant checker that a checked
// build calls on an allocator's slow paths, so that checking keeps the
// program's cost linear. A checker costs about as many steps as the
// structures it walks hold; run on every call, it would make n calls cost
// O(n^2). A Schedule runs it on the first call and then again once as
// many calls have passed as the last run took steps: the checker's steps
// never exceed the calls made (plus the first run's), and a structure
// that grows to n items is checked O(log n) times while it grows and
// every O(n) calls after that.
//
// The zero Schedule is due at once. It is not safe for concurrent use: an
// allocator keeps one per lock, or per single-goroutine structure.
type Schedule struct {
	calls uint64 // slow-path calls counted
	next  uint64 // the call at which the checker is due
	runs  uint64 // checker runs recorded
	work  uint64 // checker steps recorded, in all runs
}

// Due counts one call and reports whether the checker should run now.
// The caller that gets true runs it and reports its cost with Ran.
func (s *Schedule) Due() bool {
	s.calls++
	return s.calls > s.next
}

// Ran records that the checker ran and took about work steps: it is due
// again after max(work, 1) more calls.
func (s *Schedule) Ran(work int) {
	w := uint64(max(work, 1))
	s.next = s.calls + w
	s.runs++
	s.work += w
}

// Counts returns the calls counted, the checker's runs and its steps, for
// tests that the checker runs and stays linear.
func (s *Schedule) Counts() (calls, runs, work uint64) { return s.calls, s.runs, s.work }

// Reset makes the checker due on the next call, for tests.
func (s *Schedule) Reset() { s.next = s.calls }
