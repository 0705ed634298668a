package lockfree_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/lockfree"
)

// The stress test: goroutines allocate, write their id into the chunk,
// yield, verify, and free, through the shared pool and through caches,
// freeing through one path what the other handed out. A table of owners,
// one per chunk, set with compare-and-swap when a chunk is handed out,
// catches a chunk held by two goroutines at once; the bytes written catch
// anyone writing into a chunk it does not hold. At the end every cache
// flushes and every chunk must be back: Stats().InUse == 0.
//
// Short by default (10^5 operations a mode, an operation being one
// allocate, write, yield, verify and free; 5*10^4 under -race); CARVE_LONG=1
// runs 10^7 a mode.
// The hammer mode does not yield, so that the swaps of the shared list
// race as often as they can. Run it with -race too: the "Over Go memory" modes carve Go
// memory, where the race detector sees every access to the chunks.

type stressMode struct {
	name    string
	chunks  int  // pool capacity
	over    bool // Over Go memory, else New
	workers int
	hold    int  // most chunks a worker holds at once
	caches  bool // workers own caches (else shared Alloc and Free only)
	hammer  bool // no yield while holding a chunk: more swaps race
}

var stressModes = []stressMode{
	{"shared/Over Go memory/tiny", 6, true, 4, 2, false, false},
	{"shared/Over Go memory/tiny/hammer", 6, true, 4, 2, false, true},
	{"shared/Over Go memory", 256, true, 4, 8, false, false},
	{"shared/New", 256, false, 4, 8, false, false},
	{"caches/Over Go memory", 1024, true, 4, 16, true, false},
	{"caches/New", 1024, false, 4, 16, true, false},
}

func TestStress(t *testing.T) {
	ops := 100_000
	switch {
	case os.Getenv("CARVE_LONG") == "1":
		ops = 10_000_000
	case raceEnabled:
		ops = 50_000
	}
	for _, m := range stressModes {
		t.Run(m.name, func(t *testing.T) {
			start := time.Now()
			n := stress(t, m, ops)
			t.Logf("%d workers, %d chunks: %d operations (alloc+verify+free) in %v, GOMAXPROCS %d",
				m.workers, m.chunks, n, time.Since(start).Round(time.Millisecond), runtime.GOMAXPROCS(0))
		})
	}
}

// stress runs one mode for about ops operations and returns how many ran.
func stress(t *testing.T, m stressMode, ops int) int64 {
	const size = 64
	var p *lockfree.Pool
	if m.over {
		p = heaptest.MustOver(t, lockfree.Over, make([]byte, m.chunks*size), size)
	} else {
		p = heaptest.MustNew(t, lockfree.New, size, lockfree.Limit(int64(m.chunks*size)), lockfree.SlabSize(m.chunks*size))
	}
	lo, _ := p.Bounds()
	owners := make([]atomic.Int32, m.chunks)
	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, m.workers)
	caches := make([]*lockfree.Cache, m.workers)
	for w := range m.workers {
		caches[w] = p.NewCache()
		wg.Go(func() {
			errs[w] = stressWorker(p, caches[w], m, w+1, ops/m.workers, owners, lo, &done)
		})
	}
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Errorf("worker %d: %v", w+1, err)
		}
	}
	mustCheckCaches(t, p, "the stress", caches...)
	for _, c := range caches {
		if err := c.Flush(); err != nil {
			t.Fatalf("Flush() = %v", err)
		}
	}
	heaptest.MustCheck(t, p, "flushing every cache")
	st := checkStats(t, p)
	if st.InUse != 0 || st.Cached != 0 || st.Free != st.Carved {
		t.Errorf("Stats() after every chunk was freed and every cache flushed = %+v, want InUse 0, Cached 0, Free = Carved", st)
	}
	for i := range owners {
		if o := owners[i].Load(); o != 0 {
			t.Errorf("chunk %d still owned by worker %d", i, o)
		}
	}
	return done.Load()
}

// stressWorker is one goroutine of the stress test.
func stressWorker(p *lockfree.Pool, c *lockfree.Cache, m stressMode, id, ops int, owners []atomic.Int32, lo uintptr, done *atomic.Int64) error {
	r := rand.New(rand.NewPCG(uint64(id), 99))
	type held struct {
		b   []byte
		seq uint64
	}
	var hold []held
	free := func(h held) error {
		i := (heaptest.Addr(h.b) - lo) / 64
		if got := binary.LittleEndian.Uint64(h.b); got != uint64(id) {
			return fmt.Errorf("chunk %d: owner word %d, want %d: someone else wrote it", i, got, id)
		}
		if got := binary.LittleEndian.Uint64(h.b[56:]); got != h.seq {
			return fmt.Errorf("chunk %d: sequence %d, want %d", i, got, h.seq)
		}
		if !owners[i].CompareAndSwap(int32(id), 0) {
			return fmt.Errorf("chunk %d: owner table says %d, want %d", i, owners[i].Load(), id)
		}
		var err error
		if m.caches && r.IntN(4) > 0 {
			err = c.Free(h.b)
		} else {
			err = p.Free(h.b)
		}
		return err
	}
	var seq uint64
	for int(seq) < ops {
		if len(hold) == m.hold || len(hold) > 0 && r.IntN(2) == 0 {
			k := r.IntN(len(hold))
			if err := free(hold[k]); err != nil {
				return err
			}
			hold[k] = hold[len(hold)-1]
			hold = hold[:len(hold)-1]
			continue
		}
		var b []byte
		var err error
		if m.caches && r.IntN(4) > 0 {
			b, err = c.Alloc()
		} else {
			b, err = p.Alloc()
		}
		if errors.Is(err, lockfree.ErrExhausted) {
			// Others hold the rest (in hand or in caches): give one back,
			// or let them go on.
			if len(hold) > 0 {
				if err := free(hold[len(hold)-1]); err != nil {
					return err
				}
				hold = hold[:len(hold)-1]
				continue
			}
			if m.caches && r.IntN(8) == 0 {
				if err := c.Flush(); err != nil {
					return err
				}
			}
			runtime.Gosched()
			continue
		}
		if err != nil {
			return err
		}
		i := (heaptest.Addr(b) - lo) / 64
		if !owners[i].CompareAndSwap(0, int32(id)) {
			return fmt.Errorf("chunk %d handed to worker %d while worker %d holds it", i, id, owners[i].Load())
		}
		seq++
		binary.LittleEndian.PutUint64(b, uint64(id))
		binary.LittleEndian.PutUint64(b[56:], seq)
		for k := 8; k < 56; k++ {
			b[k] = byte(id)
		}
		if !m.hammer {
			runtime.Gosched()
		}
		for k := 8; k < 56; k++ {
			if b[k] != byte(id) {
				return fmt.Errorf("chunk %d: byte %d = %d after yielding, want %d", i, k, b[k], id)
			}
		}
		hold = append(hold, held{b, seq})
		done.Add(1)
	}
	for _, h := range hold {
		if err := free(h); err != nil {
			return err
		}
	}
	return nil
}

// TestRaceDetectorSeesChunks shows that the -race runs above mean
// something: over Go memory, the race detector watches the chunks. A child
// process writes one chunk from two goroutines without synchronization and
// must be reported.
func TestRaceDetectorSeesChunks(t *testing.T) {
	if os.Getenv("CARVE_LOCKFREE_RACE_CHILD") == "1" {
		p, err := lockfree.Over(make([]byte, 4*64), 64)
		if err != nil {
			t.Fatal(err)
		}
		b, err := p.NewCache().Alloc()
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			b[0] = 1
			close(done)
		}()
		b[0] = 2
		<-done
		return
	}
	if !raceEnabled {
		t.Skip("needs -race")
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRaceDetectorSeesChunks$", "-test.count=1")
	cmd.Env = append(os.Environ(), "CARVE_LOCKFREE_RACE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "WARNING: DATA RACE") {
		t.Errorf("child writing a chunk from two goroutines: %v, output:\n%s\nwant a data race reported", err, out)
	}
}
