package replay

import (
	"slices"
	"time"
)

// The time per call (Result.Nanos, NsPerOp) is the time spent inside the
// allocator's calls: the calls and the system calls and page faults they
// make, every call timed on its own with the monotonic clock, a reading
// before it and one after, the cost of a reading taken off. It is not
// the replayer's: its checks, its writes into the blocks
// (Options.Touch), its bookkeeping, a child process's start-up or the
// pipe it is fed through are outside the readings.
//
// Nor is it the time the thread spent off the CPU in a call, preempted
// by another thread (a busy machine, the rows replaying beside it, the Go
// runtime's collector) or blocked: on a loaded machine one such gap of a
// few milliseconds doubles the figure of a trace's 100,000 fast calls.
// The clock reads the thread's CPU time at checkpoints: before a call
// that starts CheckAfter or more after the last checkpoint, and after
// every call longer than LongCall. What the thread was off the CPU
// between two checkpoints, less the time of that interval spent outside
// the call, fell inside the call and is taken off it (Result.OffCPU). It
// never takes off a call's own time, and of a gap at most the time
// outside the call stays counted, less than CheckAfter. A checkpoint, a
// system call, costs about a microsecond where a reading of the clock
// costs tens of nanoseconds: one at most every CheckAfter keeps the
// replay near its speed.
//
// Sampling the calls instead, each sampled one counted as many times as
// it stands for, would weigh a rare long call or a preemption many times
// or not at all, and the figure would swing from run to run. Package
// libc's loop.c times the C allocators' calls by the same rule.
const (
	// CheckAfter: a call that starts this long or longer after the last
	// checkpoint has one before it.
	CheckAfter = 32 * time.Microsecond
	// LongCall: a call that took longer has a checkpoint after it.
	LongCall = 20 * time.Microsecond
)

// callClock times an allocator's calls.
type callClock struct {
	base          time.Time     // the origin of the readings
	cost          time.Duration // what a reading adds to a call's time
	cpu           bool          // the thread's CPU clock can be read
	wallAt, cpuAt time.Duration // the last checkpoint
}

func newCallClock() *callClock {
	c := &callClock{base: time.Now()}
	var d [255]time.Duration
	for i := range d {
		t := time.Since(c.base)
		d[i] = time.Since(c.base) - t
	}
	slices.Sort(d[:])
	c.cost = d[len(d)/2]
	_, c.cpu = threadCPU()
	c.checkpoint()
	return c
}

// begin returns the reading before a call, after a checkpoint if one is
// due.
func (c *callClock) begin() time.Duration {
	t := time.Since(c.base)
	if c.cpu && t-c.wallAt >= CheckAfter {
		c.checkpoint()
		t = c.wallAt
	}
	return t
}

// end returns the time of the call begun at t, less the reading's cost
// and off, the time the thread was surely off the CPU in it, which it
// returns too. A call faster than a reading's median cost takes less
// than nothing: the sum of the calls' times, not each, is the estimate.
func (c *callClock) end(t time.Duration) (d, off time.Duration) {
	e := time.Since(c.base)
	d = e - t - c.cost
	if d > LongCall && c.cpu {
		wall, cpu := c.wallAt, c.cpuAt
		c.checkpoint()
		gone := (c.wallAt - wall) - (c.cpuAt - cpu)
		outside := (t - wall) + (c.wallAt - e)
		off = min(max(gone-outside, 0), d)
	}
	return d - off, off
}

func (c *callClock) checkpoint() {
	cpu, _ := threadCPU()
	c.cpuAt, c.wallAt = cpu, time.Since(c.base)
}
