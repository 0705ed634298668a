package rows

import (
	"errors"
	"fmt"
	"os"

	carve "github.com/carvelab/carve"
	"github.com/carvelab/carve/lab/libc"
	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/traces"
	"github.com/carvelab/carve/pool"
)

// The real mallocs' rows. A C allocator inside a Go process is not what a
// C program sees (the Go runtime's threads, cgo's start-up and earlier
// mallocs change its state and its process's baseline), so a real malloc
// is replayed by a plain C process, libc's Replayer, started with
// LD_PRELOAD naming the library, and measured there as the FREENIX paper
// measured its nine: as a black box in a process of its own. This process
// reads the trace and keeps the books (replay.RunBatch); the replayer
// performs each batch of events and reports the allocator's own
// statistic and its RSS after it.
//
// What the row's figures mean, all above the replayer's baseline (after
// the allocator's first request, free(malloc(1)), and before event 0):
// the footprint is the allocator's own statistic less its value at the
// baseline, so that it starts near 0 (Row.StartupFootprint keeps that
// value), and never less than the growth of the allocator's own count of
// the bytes of its blocks in use (Used), which it must hold: a reserve
// counted at start-up would hide them otherwise (mimalloc counts its
// first 32 MiB segment committed whole, and a trace that fits in it would
// read 0 B); the resident memory at a sample is the largest RSS of the batch
// it ends (libc.Report.Resident: the kernel's high-water mark, reset at
// each sample, or the anonymous RSS when it reads more), less the
// replayer's slot table, so that the peak resident memory is the
// process's peak RSS above its baseline (Row.StartupRSS keeps the
// baseline's anonymous RSS).

// replayInC replays t through the real malloc of s in a C replayer, its
// resident memory held under limit.
func replayInC(t traces.Trace, s Spec, o Options, prog *Progress, limit int64) Row {
	rw := Row{Trace: t.Label, Allocator: s.Label(), Measured: "child"}
	ca, err := newCAllocator(s, o.Touch)
	if err != nil {
		rw.Error, rw.ErrorKind = err.Error(), ErrorKind(err)
		return rw
	}
	killed := make(chan int64, 1)
	done := make(chan struct{})
	if proc, err := os.FindProcess(ca.r.Pid()); err == nil {
		go watch(proc, limit, killed, done)
	}
	res, err := func() (replay.Result, error) {
		src, closer, err := source(t, s)
		if err != nil {
			return replay.Result{}, err
		}
		defer closer.Close()
		return replay.RunBatch(src, ca, o.replayOptions(t, prog))
	}()
	close(done)
	if cerr := ca.Close(); err == nil && cerr != nil {
		err = cerr
	}
	select {
	case rss := <-killed:
		rw.Error, rw.ErrorKind = "the C replayer was stopped: "+o.overLimit(rss, limit), KindAllocator
		return rw
	default:
	}
	rw = rw.fill(t, res, err)
	if err == nil {
		st := ca.r.Startup()
		rw.setRSS(ca.peakRSS) // the kernel's mark: the process replays the trace and nothing else
		rw.StartupFootprint, rw.StartupRSS = st.Heap.Footprint, st.AnonRSS
	}
	return rw
}

// cAllocator is a real malloc as a replay.BatchAllocator: a batch of
// events becomes a batch of libc ops, performed by the C replayer. With
// pools, requests of a pool's size are served by a carve pool in this
// process instead and never reach the replayer: the block-allocator
// article's "pool for the scratch buffers" in front of a real malloc. The
// pools' footprint and resident pages (mincore) are added to the
// replayer's.
type cAllocator struct {
	r       *libc.Replayer
	start   libc.Startup
	ops     []libc.Op
	last    libc.Report
	fresh   bool  // last was reported after the latest Apply and not read since
	peakRSS int64 // the largest high-water mark above the baseline, less the table
	pools   []*pool.Pool
	pooled  [][]byte // by slot: the pool chunk a slot holds, or nil
}

// newCAllocator starts a replayer for s's malloc and checks that it is
// the one serving it.
func newCAllocator(s Spec, touch bool) (*cAllocator, error) {
	preload := ""
	if m := realMallocs[s.Alloc]; m.libs != nil {
		preload = findLib(m)
	}
	r, err := libc.StartReplayer(preload, touch)
	if err != nil {
		return nil, err
	}
	if got := r.Identity(); got.Name != s.Alloc {
		r.Close()
		return nil, fmt.Errorf("asked for %s but %s %s serves the C replayer (is LD_PRELOAD=%s honoured?): no row", s.Alloc, got.Name, got.Version, preload)
	}
	c := &cAllocator{r: r, start: r.Startup()}
	if c.start.HeapErr != nil {
		r.Close()
		return nil, c.start.HeapErr
	}
	for _, n := range s.Pools {
		p, err := pool.New(n)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("--pool %d: %w", n, err)
		}
		c.pools = append(c.pools, p)
	}
	return c, nil
}

// poolFor returns the pool for requests of size bytes, or nil.
func (c *cAllocator) poolFor(e trace.Event) *pool.Pool {
	for _, p := range c.pools {
		if e.Size == uint64(p.ChunkSize()) && e.Align <= 8 {
			return p
		}
	}
	return nil
}

// errPooledRealloc is a realloc of a block a pool holds.
var errPooledRealloc = errors.New("realloc of a block in a pool in front of a C allocator is not replayed")

// Apply converts the events (whose IDs are slots) to ops and has the
// replayer perform them, serving the pools' requests on the way.
func (c *cAllocator) Apply(evs []trace.Event) (int64, error) {
	c.ops = c.ops[:0]
	for _, e := range evs {
		slot := uint32(e.ID)
		if len(c.pools) > 0 {
			for int(slot) >= len(c.pooled) {
				c.pooled = append(c.pooled, nil)
			}
			if b := c.pooled[slot]; b != nil {
				switch e.Op {
				case trace.Free:
					c.pooled[slot] = nil
					if err := c.poolOf(b).Free(b); err != nil {
						return 0, err
					}
					continue
				case trace.Realloc:
					return 0, errPooledRealloc
				}
			}
			if e.Op == trace.Alloc || e.Op == trace.Calloc || e.Op == trace.Memalign {
				if p := c.poolFor(e); p != nil {
					b, err := p.Alloc()
					if err != nil {
						return 0, err
					}
					clear(b) // touched, as the replayer touches C blocks
					c.pooled[slot] = b
					continue
				}
			}
		}
		op, ok := libc.OpOf(e, slot)
		if !ok {
			return 0, fmt.Errorf("event %v: not an allocator call", e)
		}
		c.ops = append(c.ops, op)
	}
	rep, err := c.r.Run(c.ops)
	c.report(rep)
	return rep.Nanos, err
}

// report keeps rep, the replayer's latest report.
func (c *cAllocator) report(rep libc.Report) {
	c.last, c.fresh = rep, true
	c.peakRSS = max(c.peakRSS, rep.PeakRSS-c.start.RSS-rep.TableBytes)
}

// poolOf returns the pool that handed out b.
func (c *cAllocator) poolOf(b []byte) *pool.Pool {
	for _, p := range c.pools {
		if p.Owns(b) {
			return p
		}
	}
	return nil
}

// Stats returns the replayer's figures after the latest batch (asking it
// for a report if it sent none since the last call), above its baseline,
// plus the pools'.
func (c *cAllocator) Stats() (carve.Stats, error) {
	if !c.fresh {
		rep, err := c.r.Run(nil)
		if err != nil {
			return carve.Stats{}, err
		}
		c.report(rep)
	}
	c.fresh = false
	rep := c.last
	if rep.HeapErr != nil {
		return carve.Stats{}, rep.HeapErr
	}
	used := max(rep.Heap.Allocated-c.start.Heap.Allocated, 0)
	st := carve.Stats{
		Footprint: max(rep.Heap.Footprint-c.start.Heap.Footprint, used),
		Used:      used,
		Resident:  rep.Resident(c.start),
	}
	for _, p := range c.pools {
		ps := p.Stats()
		st.Footprint += ps.Footprint
		st.Used += ps.Used
		st.Resident += ps.Resident
		st.Metadata += ps.Metadata
	}
	return st, nil
}

func (c *cAllocator) Close() error {
	errs := []error{c.r.Close()}
	for _, p := range c.pools {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}
