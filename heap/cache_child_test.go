package heap_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	carve "github.com/carvelab/carve"
	"github.com/carvelab/carve/fit"
	"github.com/carvelab/carve/heap"
	"github.com/carvelab/carve/mem"
)

// BenchmarkValueCache measures each store's memory and GC cost in a
// process of its own, so that no store's RSS or Go heap is left over
// from another's: it runs the test binary again with valueCacheEnv set,
// which TestValueCacheChild reads, and reads back one line of results.

// valueCacheEnv names the store, the values and the operations of the
// child's run, as "store values ops"; TestValueCacheChild skips without it.
const valueCacheEnv = "CARVE_VALUECACHE_CHILD"

// resultPrefix starts the child's line of results on its standard output.
const resultPrefix = "valuecache-result: "

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
	// goal (runtime/metrics). Store is what a carve store says of its own
	// memory (Footprint, Resident, Metadata; Purges for the heap).
	GoMapped, GoObjects, GoFree, GoGoal int64
	StoreStats                          carve.Stats
	Purges                              int64
	// Wall, CPU and GCCPU are the churn's elapsed time, the process's CPU
	// time over it (user and system; Sys the system part), and the GC's
	// share of that (/cpu/classes/gc/total:cpu-seconds); GCs counts the GC
	// cycles that ended during it, Faults the page faults.
	Wall, CPU, Sys, GCCPU int64
	GCs, Faults           int64
}

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
	return s + fmt.Sprintf("; churn %.2f s, CPU %.2f s (system %.2f s, %.3f page faults/op), GC %.3f s in %d cycles",
		time.Duration(r.Wall).Seconds(), time.Duration(r.CPU).Seconds(), time.Duration(r.Sys).Seconds(),
		float64(r.Faults)/float64(r.Ops), time.Duration(r.GCCPU).Seconds(), r.GCs)
}

// runValueCacheChild runs TestValueCacheChild in a new process of the test
// binary, for store with n values and ops operations, and returns what it
// measured.
func runValueCacheChild(store string, n, ops int) (valueCacheResult, error) {
	var res valueCacheResult
	cmd := exec.Command(os.Args[0], "-test.run=^TestValueCacheChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %d", valueCacheEnv, store, n, ops))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return res, fmt.Errorf("%s: %v\n%s%s", cmd, err, out, stderr.Bytes())
	}
	for line := range strings.Lines(string(out)) {
		if s, ok := strings.CutPrefix(line, resultPrefix); ok {
			if err := json.Unmarshal([]byte(s), &res); err != nil {
				return res, fmt.Errorf("%s: %v in %q", cmd, err, s)
			}
			if res.Store != store || res.Values != n || res.Ops != ops || res.PeakLive <= 0 || res.CPU <= 0 {
				return res, fmt.Errorf("%s measured %+v, not %s with %d values and %d ops", cmd, res, store, n, ops)
			}
			return res, nil
		}
	}
	return res, fmt.Errorf("%s printed no line starting %q:\n%s%s", cmd, resultPrefix, out, stderr.Bytes())
}

// TestValueCacheChild is the process of its own that BenchmarkValueCache
// starts for each store; it skips unless valueCacheEnv is set. It takes
// the RSS as its baseline, builds the cache, runs the churn, and prints
// what it measured on a line starting with resultPrefix.
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
	before, err := sampleCPU()
	if err != nil {
		t.Fatal(err)
	}
	for i := range res.Ops {
		if err := c.step(r); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	after, err := sampleCPU()
	if err != nil {
		t.Fatal(err)
	}
	res.Wall = after.wall.Sub(before.wall).Nanoseconds()
	res.CPU = (after.user + after.sys - before.user - before.sys).Nanoseconds()
	res.Sys = (after.sys - before.sys).Nanoseconds()
	res.Faults = after.faults - before.faults
	res.GCCPU = (after.gc - before.gc).Nanoseconds()
	res.GCs = int64(after.cycles - before.cycles)

	peak, err1 := mem.PeakRSS()
	end, err2 := mem.RSS()
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	res.PeakRSS, res.EndRSS = peak-res.BaseRSS, end-res.BaseRSS
	res.Live, res.PeakLive = c.live, c.peak
	res.GoMapped, res.GoObjects, res.GoFree, res.GoGoal = goMemory()
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
	line, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%s%s\n", resultPrefix, line)
	t.Log(res)
}

// cpuSample is the process's clocks at one point.
type cpuSample struct {
	wall      time.Time
	user, sys time.Duration // the process's CPU time
	faults    int64         // the process's page faults that needed no I/O
	gc        time.Duration // the GC's CPU time, as runtime/metrics estimates it
	cycles    uint64        // GC cycles ended
}

func sampleCPU() (cpuSample, error) {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	user, sys, faults, err := processCPU()
	return cpuSample{
		wall:   time.Now(),
		user:   user,
		sys:    sys,
		faults: faults,
		gc:     time.Duration(s[0].Value.Float64() * 1e9),
		cycles: s[1].Value.Uint64(),
	}, err
}

// goMemory returns the bytes the Go runtime holds from the OS less the
// heap pages it has given back, the bytes of its heap's objects, its free
// heap pages not given back, and its heap goal.
func goMemory() (mapped, objects, free, goal int64) {
	s := []metrics.Sample{
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/gc/heap/goal:bytes"},
	}
	metrics.Read(s)
	v := func(i int) int64 { return int64(s[i].Value.Uint64()) }
	return v(0) - v(1), v(2), v(3), v(4)
}
