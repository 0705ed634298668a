package heap_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
	"time"

	carve "github.com/carvelab/carve"
	"github.com/carvelab/carve/fit"
	"github.com/carvelab/carve/heap"
	"github.com/carvelab/carve/internal/churn"
	"github.com/carvelab/carve/mem"
)

// BenchmarkValueCache measures each store's memory and GC cost in a
// process of its own, so that no store's RSS or Go heap is left over
// from another's: it runs the test binary again with valueCacheEnv set,
// which TestValueCacheChild reads, and reads back one line of results.

// valueCacheEnv names the store, the values and the operations of the
// child's run, as "store values ops"; TestValueCacheChild skips without it.
const valueCacheEnv = "CARVE_VALUECACHE_CHILD"

// valueCacheResult is what the child measured. Bytes and nanoseconds.
type valueCacheResult struct {
	Store       string
	Values, Ops int
	// Live is the values' bytes after the churn, PeakLive the most they
	// held at any point.
	Live, PeakLive int64
	// BaseRSS is the process's RSS before the cache was built; PeakRSS the
	// peak RSS (VmHWM) above it, over the cache's whole life; EndRSS the
	// RSS above it after the churn.
	BaseRSS, PeakRSS, EndRSS int64
	// GoMapped is the memory the Go runtime holds from the OS after the
	// churn, less what it gave back; GoObjects the bytes of its heap's
	// objects, GoFree its free heap pages not given back, GoGoal its heap
	// goal (runtime/metrics). StoreStats is what a carve store says of its own
	// memory (Footprint, Resident, Metadata; Purges for the heap).
	GoMapped, GoObjects, GoFree, GoGoal int64
	StoreStats                          carve.Stats
	Purges                              int64
	// Wall, CPU and Sys are the churn's elapsed time and the process's
	// CPU time over it (getrusage: user and system, and the system part);
	// Faults counts its page faults.
	Wall, CPU, Sys, Faults int64
	// GCs counts the GC cycles that ended during the churn. GCCPU and
	// GCWindow are the runtime's figures over those cycles, from the end
	// of a collection forced just before the churn to the end of the last
	// one: the GC's CPU time (/cpu/classes/gc/total:cpu-seconds) and the
	// time the process's Ps were busy, the GC's included
	// (/cpu/classes/total, GOMAXPROCS times the elapsed time, less
	// /cpu/classes/idle). The runtime updates its CPU figures only at the
	// end of a cycle, and counts the time a P spends on a task whether or
	// not the OS runs its thread, so its documentation compares them only
	// with each other: GCCPU over getrusage's CPU grows when other
	// processes take the core, GCCPU over GCWindow does not.
	GCs, GCCPU, GCWindow int64
}

func seconds(ns int64) float64 { return time.Duration(ns).Seconds() }

func (r valueCacheResult) String() string {
	s := fmt.Sprintf("%d values, %d ops: live %.1f MiB (peak %.1f); RSS base %.1f MiB, peak +%.1f MiB, end +%.1f MiB; Go runtime %.1f MiB (heap objects %.1f, free pages %.1f, goal %.1f)",
		r.Values, r.Ops, mib(r.Live), mib(r.PeakLive), mib(r.BaseRSS), mib(r.PeakRSS), mib(r.EndRSS),
		mib(r.GoMapped), mib(r.GoObjects), mib(r.GoFree), mib(r.GoGoal))
	if st := r.StoreStats; st.Footprint > 0 {
		s += fmt.Sprintf("; store footprint %.1f MiB, resident %.1f MiB, metadata %.1f MiB", mib(st.Footprint), mib(st.Resident), mib(st.Metadata))
	}
	if r.Purges > 0 {
		s += fmt.Sprintf(", %.3f purges/op", float64(r.Purges)/float64(r.Ops))
	}
	s += fmt.Sprintf("; churn %.2f s, CPU %.2f s (system %.2f s, %.3f page faults/op); GC: %d cycles",
		seconds(r.Wall), seconds(r.CPU), seconds(r.Sys), float64(r.Faults)/float64(r.Ops), r.GCs)
	if r.GCs > 0 {
		s += fmt.Sprintf(", %.3f s of %.2f s of the Ps' busy time (%.1f%%; %.1f%% of getrusage's CPU)",
			seconds(r.GCCPU), seconds(r.GCWindow), 100*float64(r.GCCPU)/float64(r.GCWindow), 100*float64(r.GCCPU)/float64(r.CPU))
	}
	return s
}

// gcShare returns the GC's share of the CPU time of the cycles that ended
// during the churn, in percent; 0 when none did.
func (r valueCacheResult) gcShare() float64 {
	if r.GCs == 0 {
		return 0
	}
	return 100 * float64(r.GCCPU) / float64(r.GCWindow)
}

// runValueCacheChild runs TestValueCacheChild in a new process of the test
// binary, for store with n values and ops operations, and returns what it
// measured.
func runValueCacheChild(store string, n, ops int) (valueCacheResult, error) {
	var res valueCacheResult
	if err := churn.RunChild("TestValueCacheChild", []string{fmt.Sprintf("%s=%s %d %d", valueCacheEnv, store, n, ops)}, &res); err != nil {
		return res, err
	}
	if res.Store != store || res.Values != n || res.Ops != ops || res.PeakLive <= 0 || res.CPU <= 0 || (res.GCs > 0) != (res.GCWindow > 0) {
		return res, fmt.Errorf("TestValueCacheChild measured %+v, not %s with %d values and %d ops", res, store, n, ops)
	}
	return res, nil
}

// TestValueCacheChild is the process of its own that BenchmarkValueCache
// starts for each store; it skips unless valueCacheEnv is set. It takes
// the RSS as its baseline, builds the cache, runs the churn, and prints
// what it measured as its line of results (churn.PrintResult).
func TestValueCacheChild(t *testing.T) {
	env := os.Getenv(valueCacheEnv)
	if env == "" {
		t.Skipf("run by BenchmarkValueCache in a process of its own (%s unset)", valueCacheEnv)
	}
	res := valueCacheResult{}
	if _, err := fmt.Sscan(env, &res.Store, &res.Values, &res.Ops); err != nil {
		t.Fatalf("%s=%q: %v (want \"store values ops\")", valueCacheEnv, env, err)
	}
	store, err := newStore(res.Store)
	if err != nil {
		t.Fatal(err)
	}

	runtime.GC()
	if err := mem.ResetPeakRSS(); err != nil {
		t.Fatal(err)
	}
	if res.BaseRSS, err = mem.RSS(); err != nil {
		t.Fatal(err)
	}
	c, err := newValueCache(store, res.Values, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}

	r := rand.New(rand.NewPCG(2, 2))
	runtime.GC() // the runtime's CPU figures start at the end of a cycle
	before, err := churn.SampleCPU()
	if err != nil {
		t.Fatal(err)
	}
	for i := range res.Ops {
		if err := c.step(r); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	after, err := churn.SampleCPU()
	if err != nil {
		t.Fatal(err)
	}
	res.Wall = after.Wall.Sub(before.Wall).Nanoseconds()
	res.CPU = (after.User + after.Sys - before.User - before.Sys).Nanoseconds()
	res.Sys = (after.Sys - before.Sys).Nanoseconds()
	res.Faults = after.Faults - before.Faults
	res.GCs = int64(after.Cycles - before.Cycles)
	res.GCCPU = (after.GC - before.GC).Nanoseconds()
	res.GCWindow = (after.Busy - before.Busy).Nanoseconds()

	peak, err1 := mem.PeakRSS()
	end, err2 := mem.RSS()
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	res.PeakRSS, res.EndRSS = peak-res.BaseRSS, end-res.BaseRSS
	res.Live, res.PeakLive = c.live, c.peak
	res.GoMapped, res.GoObjects, res.GoFree, res.GoGoal = churn.GoMemory()
	switch h := store.(type) {
	case *heap.Heap:
		st := h.Stats()
		res.StoreStats, res.Purges = st.Stats, st.Purges
	case *fit.Heap:
		res.StoreStats = h.Stats().Stats
	}
	if err := c.verify(); err != nil {
		t.Fatal(err)
	}
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
	if err := churn.PrintResult(res); err != nil {
		t.Fatal(err)
	}
	t.Log(res)
}
