package pool_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/pool"
)

// A Pool is not safe for concurrent use, but one pool per goroutine is,
// and a pool shared under a mutex is. Run with -race: the pools here carve
// Go memory (pool.Over(make([]byte, n), ...)), which the race detector
// watches; it does not see memory that mem maps from the OS.

// churn allocates, fills, checks and frees chunks of p at random; lock and
// unlock guard the pool's calls (not the chunks, which are the caller's
// alone while allocated).
func churn(p *pool.Pool, seed uint64, rounds int, lock, unlock func()) error {
	r := rand.New(rand.NewPCG(seed, seed))
	type held struct {
		c  []byte
		id int
	}
	var live []held
	for i := range rounds {
		if len(live) == 0 || r.IntN(3) > 0 {
			lock()
			c, err := p.Alloc()
			unlock()
			if err != nil {
				if len(live) == 0 {
					return fmt.Errorf("Alloc() with nothing held = %v", err)
				}
				continue
			}
			heaptest.Fill(c, int(seed)*1000000+i)
			live = append(live, held{c, int(seed)*1000000 + i})
			continue
		}
		k := r.IntN(len(live))
		h := live[k]
		live[k] = live[len(live)-1]
		live = live[:len(live)-1]
		if j := heaptest.Intact(h.c, h.id); j >= 0 {
			return fmt.Errorf("chunk %#x lost byte %d while held", heaptest.Addr(h.c), j)
		}
		lock()
		err := p.Free(h.c)
		unlock()
		if err != nil {
			return fmt.Errorf("Free(%#x) = %v", heaptest.Addr(h.c), err)
		}
	}
	for _, h := range live {
		lock()
		err := p.Free(h.c)
		unlock()
		if err != nil {
			return fmt.Errorf("Free(%#x) = %v", heaptest.Addr(h.c), err)
		}
	}
	return nil
}

func TestPoolPerGoroutine(t *testing.T) {
	const workers, rounds = 4, 5000
	nop := func() {}
	for _, kind := range []string{"Over Go memory", "New"} {
		t.Run(kind, func(t *testing.T) {
			pools := make([]*pool.Pool, workers)
			for w := range pools {
				if kind == "New" {
					pools[w] = heaptest.MustNew(t, pool.New, 48, pool.SlabSize(4096))
				} else {
					pools[w] = heaptest.MustOver(t, pool.Over, make([]byte, 64<<10), 48)
				}
			}
			var wg sync.WaitGroup
			errs := make([]error, workers)
			for w := range workers {
				wg.Go(func() { errs[w] = churn(pools[w], uint64(w+1), rounds, nop, nop) })
			}
			wg.Wait()
			for w, err := range errs {
				if err != nil {
					t.Errorf("worker %d: %v", w, err)
				}
				heaptest.MustCheck(t, pools[w], "churn")
				if st := checkStats(t, pools[w]); st.InUse != 0 {
					t.Errorf("worker %d: Stats().InUse = %d after freeing everything, want 0", w, st.InUse)
				}
			}
		})
	}
}

// TestSharedPoolLocked shares one pool between goroutines under a mutex:
// chunks pass from one goroutine to another through the free list, and the
// race detector checks that the mutex orders those handovers.
func TestSharedPoolLocked(t *testing.T) {
	const workers, rounds = 4, 5000
	p := heaptest.MustOver(t, pool.Over, make([]byte, 256<<10), 40)
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Go(func() { errs[w] = churn(p, uint64(w+1), rounds, mu.Lock, mu.Unlock) })
	}
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Errorf("worker %d: %v", w, err)
		}
	}
	heaptest.MustCheck(t, p, "churn")
	if st := checkStats(t, p); st.InUse != 0 {
		t.Errorf("Stats().InUse = %d after freeing everything, want 0", st.InUse)
	}
}

// raceEnabled reports whether the test binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// TestRaceDetectorSeesChunks shows that the race detector watches the
// chunks of a pool over Go memory: a child process writes one chunk from
// two goroutines unsynchronized and must be reported.
func TestRaceDetectorSeesChunks(t *testing.T) {
	if os.Getenv("CARVE_RACE_CHILD") == "1" {
		p, err := pool.Over(make([]byte, 4*64), 64)
		if err != nil {
			t.Fatal(err)
		}
		c, err := p.Alloc()
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			c[0] = 1
			close(done)
		}()
		c[0] = 2
		<-done
		return
	}
	if !raceEnabled() {
		t.Skip("needs -race")
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRaceDetectorSeesChunks$", "-test.count=1")
	cmd.Env = append(os.Environ(), "CARVE_RACE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "WARNING: DATA RACE") {
		t.Errorf("child writing a chunk from two goroutines: %v, output:\n%s\nwant a data race reported", err, out)
	}
}
