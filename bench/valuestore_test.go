package bench

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carvelab/carve/internal/churn"
	"github.com/carvelab/carve/mem"
)

// storeValues is how many values the benchmark's stores hold: 250,000, or
// 10,000 with -short, for smoke runs.
func storeValues() int {
	if testing.Short() {
		return 10000
	}
	return 250000
}

// churnPerValue is how many churn operations per value the process of its
// own runs: most keys are set or deleted several times.
const churnPerValue = 8

// fill builds the load over store with one worker per goroutine, each
// filling its share of the keys, and waits for the store's sets.
func fill(l *Load, values, goroutines int) error {
	var wg sync.WaitGroup
	errs := make([]error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[g] = l.NewWorker(g, goroutines, uint64(1000+g)).Fill(values*g/goroutines, values*(g+1)/goroutines)
		}()
	}
	wg.Wait()
	Wait(l.store)
	return errors.Join(errs...)
}

// TestStores runs the load, small, over each store at two goroutines and
// checks what it reads: every value got is its key's; carve's store and
// the Go map lose nothing; fastcache, sized as the benchmark sizes it,
// keeps at least 99% of the gets of present keys hitting; ristretto's
// losses are what it counts (its evictions and dropped sets), or sets it
// had not applied yet.
func TestStores(t *testing.T) {
	const values, ops, goroutines = 4000, 64000, 2
	for _, s := range Stores {
		t.Run(s.Name, func(t *testing.T) {
			store, err := s.New(Expect(values, ops))
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			l := NewLoad(store, values)
			if err := fill(l, values, goroutines); err != nil {
				t.Fatal(err)
			}
			var total Counts
			var wg sync.WaitGroup
			workers := make([]*Worker, goroutines)
			errs := make([]error, goroutines)
			for g := range goroutines {
				workers[g] = l.NewWorker(g, goroutines, uint64(g))
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range ops / goroutines {
						if errs[g] = workers[g].Step(); errs[g] != nil {
							return
						}
					}
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			for _, w := range workers {
				total.Add(&w.Counts)
			}
			Wait(store)
			lost, stale, live, err := l.Verify()
			if err != nil {
				t.Fatal(err)
			}
			evicted, dropped := store.Lost()
			t.Logf("%d gets, %d hits, %d lost; at the end %d of the present keys lost, %d stale, %d live bytes; the store counts %d evicted, %d dropped",
				total.Gets, total.Hits, total.Lost, lost, stale, live, evicted, dropped)
			switch s.Name {
			case "carve", "gomap":
				if total.Lost != 0 || lost != 0 || stale != 0 {
					t.Fatalf("%d gets lost, %d values lost and %d stale at the end; want none", total.Lost, lost, stale)
				}
			case "fastcache":
				if hit := 1 - float64(total.Lost)/float64(total.Hits+total.Lost); hit < 0.99 {
					t.Fatalf("%.4f of the gets of present keys hit, want at least 0.99", hit)
				}
			case "ristretto":
				if lost > 0 && evicted+dropped == 0 {
					t.Fatalf("%d values lost at the end, and ristretto counts no eviction or dropped set", lost)
				}
			}
			if c, ok := store.(*carveStore); ok {
				if st := c.Heap().Stats(); st.Live != live {
					t.Fatalf("the heap's Live = %d, the load holds %d", st.Live, live)
				}
			}
		})
	}
}

// loadAverage returns the machine's load averages as /proc/loadavg says
// them, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// BenchmarkValueStore measures each store holding 250,000 values (10,000
// with -short) under the churn of Load, with GOMAXPROCS goroutines (run
// it with -cpu 1,2): the values' bytes in carve's heap.Shared (a map
// sharded as the Go map is holds the slices), in a sharded Go map of
// []byte, in fastcache and in ristretto.
//
// ns/op is measured here with b.RunParallel, after the store is filled.
// hit-% is the share of the gets of present keys that found their value
// (below 100 where the store lost values). Then a process of its own per
// store (the test binary again, running TestValueStoreChild) fills the
// store and runs 8 operations per value at the same GOMAXPROCS, and the
// benchmark reports what it measured: rss/live, the peak RSS above the
// RSS before the store was made (VmHWM, reset at that point) over the
// most bytes the present values held (sampled every millisecond);
// gc-cpu-%, the GC's share of the Ps' busy time over the churn's GC
// cycles; cpu-ns/op, the process's CPU time per operation; lost, evicted
// and dropped, the child's values lost (gets of present keys that missed)
// and what the store counts. The machine's load average is logged. Compare
// side by side:
//
//	cd bench && go test -run '^$' -bench ValueStore -cpu 1,2 -count 3 . > vs.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /store vs.txt
func BenchmarkValueStore(b *testing.B) {
	n := storeValues()
	b.Logf("load average %s, GOMAXPROCS %d", loadAverage(), runtime.GOMAXPROCS(0))
	for _, s := range Stores {
		b.Run("store="+s.Name, func(b *testing.B) {
			store, err := s.New(Expect(n, b.N))
			if err != nil {
				b.Fatal(err)
			}
			l := NewLoad(store, n)
			if err := fill(l, n, runtime.GOMAXPROCS(0)); err != nil {
				b.Fatal(err)
			}
			var mu sync.Mutex
			var total Counts
			var next int
			procs := runtime.GOMAXPROCS(0) // RunParallel's goroutines, at parallelism 1
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				mu.Lock()
				w := l.NewWorker(next, procs, uint64(next+1))
				next++
				mu.Unlock()
				for pb.Next() {
					if err := w.Step(); err != nil {
						b.Error(err)
						return
					}
				}
				mu.Lock()
				total.Add(&w.Counts)
				mu.Unlock()
			})
			b.StopTimer()
			if total.Hits+total.Lost > 0 {
				b.ReportMetric(100*float64(total.Hits)/float64(total.Hits+total.Lost), "hit-%")
			}
			if err := store.Close(); err != nil {
				b.Fatal(err)
			}
			l, store = nil, nil
			runtime.GC()

			res, err := childResult(s.Name, n, churnPerValue*n, runtime.GOMAXPROCS(0))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(res.PeakRSS)/float64(res.PeakLive), "rss/live")
			b.ReportMetric(res.gcShare(), "gc-cpu-%")
			b.ReportMetric(float64(res.CPU)/float64(res.Ops), "cpu-ns/op")
			b.ReportMetric(float64(res.Lost), "lost")
			b.ReportMetric(float64(res.StaleAtEnd), "stale")
			b.ReportMetric(float64(res.Evicted), "evicted")
			b.ReportMetric(float64(res.Dropped), "dropped")
			b.Logf("own process: %s", res)
		})
	}
}

// valueStoreEnv names the store, the values, the operations and the
// goroutines of the child's run, as "store values ops goroutines";
// TestValueStoreChild skips without it.
const valueStoreEnv = "CARVE_VALUESTORE_CHILD"

// storeResult is what the child measured. Bytes and nanoseconds.
type storeResult struct {
	Store                   string
	Values, Ops, Goroutines int
	// Live is the present values' bytes after the churn, PeakLive the
	// most they held in the samples taken every millisecond.
	Live, PeakLive int64
	// BaseRSS is the process's RSS before the store was made; PeakRSS the
	// peak RSS (VmHWM) above it; EndRSS the RSS above it after the churn.
	BaseRSS, PeakRSS, EndRSS int64
	// Gets and Hits count the churn's gets; Lost the gets of present keys
	// that missed, LostAtEnd the present keys without a value at the end
	// and StaleAtEnd those with an older value; Evicted and Dropped are
	// what the store counts.
	Gets, Hits, Lost, LostAtEnd, StaleAtEnd, Evicted, Dropped int64
	// Wall and CPU are the churn's elapsed time and the process's CPU
	// time over it; GCs the GC cycles that ended during it, GCCPU and
	// GCWindow the GC's CPU time and the Ps' busy time over them (see
	// churn.CPUSample).
	Wall, CPU, GCs, GCCPU, GCWindow int64
}

func (r storeResult) String() string {
	s := fmt.Sprintf("%d values, %d ops on %d goroutines: live %.1f MiB (peak %.1f); RSS base %.1f MiB, peak +%.1f MiB, end +%.1f MiB; %d gets, %d hits, %d lost (%d at the end, %d stale), the store counts %d evicted, %d dropped; churn %.2f s, CPU %.2f s; GC: %d cycles",
		r.Values, r.Ops, r.Goroutines, mib(r.Live), mib(r.PeakLive), mib(r.BaseRSS), mib(r.PeakRSS), mib(r.EndRSS),
		r.Gets, r.Hits, r.Lost, r.LostAtEnd, r.StaleAtEnd, r.Evicted, r.Dropped, seconds(r.Wall), seconds(r.CPU), r.GCs)
	if r.GCs > 0 {
		s += fmt.Sprintf(", %.3f s of %.2f s of the Ps' busy time (%.1f%%)", seconds(r.GCCPU), seconds(r.GCWindow), r.gcShare())
	}
	return s
}

func mib(n int64) float64      { return float64(n) / (1 << 20) }
func seconds(ns int64) float64 { return time.Duration(ns).Seconds() }
func (r storeResult) gcShare() float64 {
	if r.GCs == 0 {
		return 0
	}
	return 100 * float64(r.GCCPU) / float64(r.GCWindow)
}

// childResults keeps each child's result, by store, values, ops and
// goroutines: the benchmark function runs more than once as b.N grows,
// and one child per store and GOMAXPROCS is enough.
var childResults = map[string]storeResult{}

// childResult returns the child's result for the arguments, running it
// the first time.
func childResult(store string, n, ops, goroutines int) (storeResult, error) {
	k := fmt.Sprint(store, n, ops, goroutines)
	if r, ok := childResults[k]; ok {
		return r, nil
	}
	r, err := runValueStoreChild(store, n, ops, goroutines)
	if err == nil {
		childResults[k] = r
	}
	return r, err
}

// runValueStoreChild runs TestValueStoreChild in a new process of the
// test binary and returns what it measured.
func runValueStoreChild(store string, n, ops, goroutines int) (storeResult, error) {
	var res storeResult
	if err := churn.RunChild("TestValueStoreChild", []string{fmt.Sprintf("%s=%s %d %d %d", valueStoreEnv, store, n, ops, goroutines), fmt.Sprintf("GOMAXPROCS=%d", goroutines)}, &res); err != nil {
		return res, err
	}
	if res.Store != store || res.Values != n || res.Ops != ops || res.PeakLive <= 0 || res.CPU <= 0 {
		return res, fmt.Errorf("TestValueStoreChild measured %+v, not %s with %d values and %d ops", res, store, n, ops)
	}
	return res, nil
}

// TestValueStoreChild is the process of its own BenchmarkValueStore
// starts for each store; it skips unless valueStoreEnv is set.
func TestValueStoreChild(t *testing.T) {
	env := os.Getenv(valueStoreEnv)
	if env == "" {
		t.Skipf("run by BenchmarkValueStore in a process of its own (%s unset)", valueStoreEnv)
	}
	res := storeResult{}
	if _, err := fmt.Sscan(env, &res.Store, &res.Values, &res.Ops, &res.Goroutines); err != nil {
		t.Fatalf("%s=%q: %v (want \"store values ops goroutines\")", valueStoreEnv, env, err)
	}
	runtime.GC()
	if err := mem.ResetPeakRSS(); err != nil {
		t.Fatal(err)
	}
	var err error
	if res.BaseRSS, err = mem.RSS(); err != nil {
		t.Fatal(err)
	}
	store, err := NewStore(res.Store, Expect(res.Values, res.Ops))
	if err != nil {
		t.Fatal(err)
	}
	l := NewLoad(store, res.Values)
	if err := fill(l, res.Values, res.Goroutines); err != nil {
		t.Fatal(err)
	}
	_, _, filled, err := l.Verify()
	if err != nil {
		t.Fatal(err)
	}

	workers := make([]*Worker, res.Goroutines)
	for g := range workers {
		workers[g] = l.NewWorker(g, len(workers), uint64(g+1))
	}
	liveNow := func() int64 {
		n := filled
		for _, w := range workers {
			n += w.Live.Load()
		}
		return n
	}
	res.PeakLive = filled
	stop, sampled := make(chan struct{}), make(chan int64)
	go func() {
		peak := filled
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				sampled <- max(peak, liveNow())
				return
			case <-tick.C:
				peak = max(peak, liveNow())
			}
		}
	}()

	runtime.GC() // the runtime's CPU figures start at the end of a cycle
	before, err := churn.SampleCPU()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(workers))
	for g, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range res.Ops / len(workers) {
				if errs[g] = w.Step(); errs[g] != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	after, err := churn.SampleCPU()
	if err != nil {
		t.Fatal(err)
	}
	close(stop)
	res.PeakLive = max(res.PeakLive, <-sampled)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	res.Wall = after.Wall.Sub(before.Wall).Nanoseconds()
	res.CPU = (after.User + after.Sys - before.User - before.Sys).Nanoseconds()
	res.GCs = int64(after.Cycles - before.Cycles)
	res.GCCPU = (after.GC - before.GC).Nanoseconds()
	res.GCWindow = (after.Busy - before.Busy).Nanoseconds()

	peak, err1 := mem.PeakRSS()
	end, err2 := mem.RSS()
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	res.PeakRSS, res.EndRSS = peak-res.BaseRSS, end-res.BaseRSS
	var total Counts
	for _, w := range workers {
		total.Add(&w.Counts)
	}
	res.Gets, res.Hits, res.Lost = total.Gets, total.Hits, total.Lost
	Wait(store)
	lost, stale, live, err := l.Verify()
	if err != nil {
		t.Fatal(err)
	}
	res.LostAtEnd, res.StaleAtEnd, res.Live = int64(lost), int64(stale), live
	res.Evicted, res.Dropped = store.Lost()
	if c, ok := store.(*carveStore); ok {
		if st := c.Heap().Stats(); st.Live != live {
			t.Fatalf("the heap's Live = %d, the load holds %d", st.Live, live)
		}
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	if err := churn.PrintResult(res); err != nil {
		t.Fatal(err)
	}
	t.Log(res)
}
