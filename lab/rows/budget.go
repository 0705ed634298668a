package rows

import (
	"fmt"
	"math"
	"sync"

	carve "github.com/carvelab/carve"
	"github.com/carvelab/carve/internal/size"
	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/traces"
)

// The memory budget of a run. The rows replayed at once (Run's jobs) share
// one budget, the same for the whole program: replay.DefaultBudget, half
// the physical memory. Before a row starts it reserves what it may hold
// (its need, below), waiting while the rows running hold the rest; it
// holds its reservation until it ends, and may not pass it: carve's heaps
// in this process stop with an error wrapping replay.ErrBudget when their
// footprint or resident bytes pass it (replay.Options.MaxMemory), and a
// child process is stopped when its resident memory does. A row whose
// need alone passes the whole budget fails at once with that error, at
// any --jobs: a trace that replays one row at a time replays as many at
// once, its rows waiting for each other.
//
// A row's need is what replaying the trace costs: Margin times the
// trace's peak live memory (the go row: 2 + GOGC/100 times when that is
// more, its heap growing to 1 + GOGC/100 times the live heap between
// collections), the
// replayer's tables of the trace's objects (rowSlotBytes a live object
// besides the ledger's own), and rowBase for the process; Options.MaxRSS
// lowers it. The peak live memory and the tables are measured exactly, by
// a replay of the trace that calls no allocator (measure), once per trace
// of a run; --max-request lowers them, the requests above it being
// skipped. (In a build with the race detector the go row needs
// raceGoNeed times as much.)

// Margin is how many times a trace's peak live memory a row may hold:
// the headline (peak RSS over peak live) of a heap rarely reaches 2, a
// binary buddy's rounding of every request to a power of two included.
const Margin = 3

const (
	// rowBase is what a row holds whatever its trace: a child's process
	// (the Go runtime, the C replayer), an allocator's first slabs.
	rowBase = 64 << 20
	// rowSlotBytes is what the replayer holds for each live object
	// besides the ledger's tables: the block's slice and its node in the
	// set of live blocks (Run), the C replayer's pointer.
	rowSlotBytes = 96
)

// measure is what a trace costs to replay, found by replaying it once
// through no allocator.
type measure struct {
	peakLive, slots, ledger int64
	err                     error // the trace could not be replayed: every row fails so
}

// nop is the allocator of a measure: it holds nothing.
type nop struct{}

func (nop) Apply([]trace.Event) (nanos, offCPU int64, err error) { return 0, 0, nil }
func (nop) Stats() (carve.Stats, error)                          { return carve.Stats{}, nil }
func (nop) Close() error                                         { return nil }

// measureTrace replays t through no allocator with o's rules of a
// request and of the trace.
func measureTrace(t traces.Trace, o Options) measure {
	src, closer, err := t.Open()
	if err != nil {
		return measure{err: fmt.Errorf("%w: %w", replay.ErrSource, err)}
	}
	defer closer.Close()
	opt := o.replayOptions(t, nil)
	opt.Series, opt.Marks = 0, nil
	res, err := replay.RunBatch(src, nop{}, opt)
	return measure{peakLive: res.PeakLive, slots: res.Slots, ledger: res.LedgerBytes, err: err}
}

// need returns what a row of s may hold replaying the trace m measured.
func (m measure) need(s Spec) int64 {
	n := s.margin()*float64(m.peakLive) + float64(m.ledger) + rowSlotBytes*float64(m.slots) + rowBase
	if s.Alloc == "go" {
		n *= raceGoNeed
	}
	return int64(min(n, math.MaxInt64/2))
}

// reservation returns the memory a row of s reserves of budget, or an
// error wrapping replay.ErrBudget when it alone would pass it.
func (m measure) reservation(s Spec, o Options, budget int64) (int64, error) {
	need := m.need(s)
	if o.MaxRSS > 0 {
		need = min(need, o.MaxRSS)
	}
	if need > budget {
		return 0, fmt.Errorf("%w: the row may hold %s (%g times the trace's peak live memory of %s, and the replayer's tables), more than the %s all the rows of a run may hold at once (half the physical memory); --max-rss SIZE lowers a row's share, a row stopping when it passes it",
			replay.ErrBudget, size.Format(need), s.margin(), size.Format(m.peakLive), size.Format(budget))
	}
	return need, nil
}

// margin returns how many times a trace's peak live memory a row of s
// may hold: Margin, or for the go row 2 + GOGC/100 when that is more.
func (s Spec) margin() float64 {
	if s.Alloc == "go" {
		return max(Margin, 2+float64(s.gogc())/100)
	}
	return Margin
}

// budget is a weighted semaphore of bytes: what the rows running hold.
type budget struct {
	mu    sync.Mutex
	freed sync.Cond
	total int64
	held  int64
	peak  int64 // the most held at once
}

func newBudget(total int64) *budget {
	b := &budget{total: total}
	b.freed.L = &b.mu
	return b
}

// reserve waits until n bytes are free and takes them; n must not pass
// the total.
func (b *budget) reserve(n int64) {
	b.mu.Lock()
	for b.held+n > b.total {
		b.freed.Wait()
	}
	b.held += n
	b.peak = max(b.peak, b.held)
	b.mu.Unlock()
}

// release gives back n bytes reserve took.
func (b *budget) release(n int64) {
	b.mu.Lock()
	b.held -= n
	b.mu.Unlock()
	b.freed.Broadcast()
}

// runBudget returns the program's budget: every row of every run shares
// it. (A variable for the tests.)
var runBudget = sync.OnceValue(func() *budget { return newBudget(replay.DefaultBudget()) })

// overLimit says why a row's child process whose resident memory reached
// rss was stopped, its limit being limit.
func (o Options) overLimit(rss, limit int64) string {
	why := "the row's share of the run's memory budget"
	if o.MaxRSS > 0 && limit == o.MaxRSS {
		why = "--max-rss"
	}
	return fmt.Sprintf("its resident memory reached %s, above the limit of %s (%s)", size.Format(rss), size.Format(limit), why)
}
