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
// counted at start-up would hide them otherwise; the resident memory at a
// sample is the largest RSS of the batch it ends (libc.Report.Resident:
// the kernel's high-water mark, reset at each sample, or the anonymous
// RSS when it reads more), less the replayer's slot table, so that the
// peak resident memory is the process's peak RSS above its baseline
// (Row.StartupRSS keeps the baseline's anonymous RSS).

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
		if len(s.Routes) > 0 {
			routed := ca.router.Routed()
			rw.Routed = &routed
		}
		st := ca.r.Startup()
		rw.setRSS(ca.peakRSS) // the kernel's mark: the process replays the trace and nothing else
		rw.StartupFootprint, rw.StartupRSS = st.Heap.Footprint, st.AnonRSS
	}
	return rw
}

// cAllocator is a real malloc as a replay.BatchAllocator: a batch of
// events becomes a batch of libc ops, performed by the C replayer. With
// routes, the requests they take are served by carve's allocators in
// this process instead (a replay.Router, the same as every row's) and
// never reach the replayer: the block-allocator article's "pool for the
// scratch buffers" in front of a real malloc. The routes' figures are
// added to the replayer's.
type cAllocator struct {
	r       *libc.Replayer
	start   libc.Startup
	ops     []libc.Op
	last    libc.Report
	fresh   bool  // last was reported after the latest Apply and not read since
	peakRSS int64 // the largest high-water mark above the baseline, less the table
	router  *replay.Router
	routed  [][]byte // by slot: the block the router holds for it, or nil
}

// newCAllocator starts a replayer for s's malloc and checks that it is
// the one serving it.
func newCAllocator(s Spec, touch bool) (*cAllocator, error) {
	router, err := replay.NewRouter(s.Routes)
	if err != nil {
		return nil, err
	}
	preload := ""
	if m, _ := realMallocOf(s.Alloc); m.libs != nil {
		preload = findLib(m)
	}
	r, err := libc.StartReplayer(preload, touch)
	if err != nil {
		router.Close()
		return nil, err
	}
	c := &cAllocator{r: r, start: r.Startup(), router: router}
	if got := r.Identity(); got.Name != s.Alloc {
		c.Close()
		return nil, fmt.Errorf("asked for %s but %s %s serves the C replayer (is LD_PRELOAD=%s honoured?): no row", s.Alloc, got.Name, got.Version, preload)
	}
	if c.start.HeapErr != nil {
		c.Close()
		return nil, c.start.HeapErr
	}
	return c, nil
}

// UseLabels gives the routes the trace's labels.
func (c *cAllocator) UseLabels(labels *trace.Labels) { c.router.UseLabels(labels) }

// Router returns the routes in front of the malloc (replay.Routing).
func (c *cAllocator) Router() *replay.Router { return c.router }

// Apply converts the events (whose IDs are slots) to ops and has the
// replayer perform them, serving the routes' requests on the way (the
// rule at the top of replay's route.go): a routed block is touched whole,
// as the replayer touches C blocks; a block that leaves the routes is a
// pool free and a malloc op on its slot, one that joins them a free op
// of its slot and a routed block.
func (c *cAllocator) Apply(evs []trace.Event) (nanos, offCPU int64, err error) {
	c.ops = c.ops[:0]
	for _, e := range evs {
		slot := uint32(e.ID)
		if len(c.router.Routes()) > 0 {
			done, err := c.route(&e, slot)
			if err != nil {
				return 0, 0, err
			}
			if done {
				continue
			}
		}
		op, ok := libc.OpOf(e, slot)
		if !ok {
			return 0, 0, fmt.Errorf("event %v: not an allocator call", e)
		}
		c.ops = append(c.ops, op)
	}
	rep, err := c.r.Run(c.ops)
	c.report(rep)
	return rep.Nanos, rep.OffCPU, err
}

// route performs the routed part of e on slot: done reports that nothing
// is left for the replayer; else e (perhaps made an allocation) is its.
func (c *cAllocator) route(e *trace.Event, slot uint32) (done bool, err error) {
	for int(slot) >= len(c.routed) {
		c.routed = append(c.routed, nil)
	}
	held := c.routed[slot]
	switch {
	case e.Op == trace.Free && held != nil:
		c.routed[slot] = nil
		return true, c.router.Free(held)
	case e.Op == trace.Realloc && held != nil:
		n, ok, err := c.router.Realloc(held, int(e.Size))
		if err != nil || ok {
			clear(n)
			c.routed[slot] = n
			return true, err
		}
		// Out of the routes: a malloc of the new size on the slot.
		c.routed[slot] = nil
		e.Op, e.Align = trace.Alloc, 0
		return false, c.router.Free(held)
	case e.Op == trace.Realloc:
		n, ok, err := c.router.Alloc(int(e.Size), 0, 0)
		if err != nil || !ok {
			return false, err
		}
		// Into a route: the replayer frees its block.
		clear(n)
		c.routed[slot] = n
		c.ops = append(c.ops, libc.Op{Kind: libc.OpFree, Slot: slot})
		return true, nil
	case e.Op == trace.Alloc || e.Op == trace.Calloc || e.Op == trace.Memalign:
		align := int(e.Align)
		if e.Op == trace.Calloc {
			align = 0
		}
		n, ok, err := c.router.Alloc(int(e.Size), align, e.Label)
		if err != nil || !ok {
			return false, err
		}
		clear(n) // touched, as the replayer touches C blocks
		c.routed[slot] = n
		return true, nil
	}
	return false, nil
}

// report keeps rep, the replayer's latest report.
func (c *cAllocator) report(rep libc.Report) {
	c.last, c.fresh = rep, true
	c.peakRSS = max(c.peakRSS, rep.PeakRSS-c.start.RSS-rep.TableBytes)
}

// Stats returns the replayer's figures after the latest batch (asking it
// for a report if it sent none since the last call), above its baseline,
// plus the routes'.
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
	rs := c.router.Stats()
	st.Footprint += rs.Footprint
	st.Used += rs.Used
	st.Resident += rs.Resident
	st.Metadata += rs.Metadata
	return st, nil
}

func (c *cAllocator) Close() error {
	return errors.Join(c.r.Close(), c.router.Close())
}
