package buddy_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/carvelab/carve/buddy"
	"github.com/carvelab/carve/internal/heaptest"
)

// A Heap is not safe for concurrent use, but one heap per goroutine is,
// and one heap shared under a mutex is. Run with -race: the blocks live in
// memory mapped from the OS, which the race detector does not see, but
// the side tables and counts are Go memory, which it does.

// churn allocates, fills, checks and frees blocks of h at random; lock
// and unlock guard the heap's calls (not the blocks, which are the
// caller's alone while allocated).
func churn(h *buddy.Heap, seed uint64, rounds int, lock, unlock func()) error {
	r := rand.New(rand.NewPCG(seed, seed))
	type held struct {
		b  []byte
		id int
	}
	var live []held
	for i := range rounds {
		if len(live) == 0 || r.IntN(3) > 0 {
			size := 1 << r.IntN(14)
			size += r.IntN(size)
			lock()
			b, err := h.Alloc(size, 1<<r.IntN(7))
			unlock()
			if err != nil {
				return fmt.Errorf("Alloc(%d) = %v", size, err)
			}
			id := int(seed)*100000 + i
			heaptest.Fill(b, id)
			live = append(live, held{b, id})
			continue
		}
		k := r.IntN(len(live))
		o := live[k]
		live[k] = live[len(live)-1]
		live = live[:len(live)-1]
		if j := heaptest.Intact(o.b, o.id); j >= 0 {
			return fmt.Errorf("block %#x lost byte %d while held", heaptest.Addr(o.b), j)
		}
		lock()
		err := h.Free(o.b)
		unlock()
		if err != nil {
			return fmt.Errorf("Free(%#x) = %v", heaptest.Addr(o.b), err)
		}
	}
	for _, o := range live {
		lock()
		err := h.Free(o.b)
		unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

func TestSharedUnderMutex(t *testing.T) {
	for _, mode := range modes {
		h := mustNew(t, mode, buddy.Limit(64<<20))
		var mu sync.Mutex
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for g := range 4 {
			wg.Go(func() {
				if err := churn(h, uint64(g+1), 2000, mu.Lock, mu.Unlock); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("%v: %v", mode, err)
		}
		mustCheck(t, h, "the goroutines")
		if s := checkStats(t, h); s.Live != 0 || s.Blocks != 0 {
			t.Errorf("%v: Stats() after every block was freed = %+v", mode, s.Stats)
		}
	}
}

func TestOnePerGoroutine(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		h := mustNew(t, modes[g%2], buddy.Limit(32<<20))
		wg.Go(func() {
			if err := churn(h, uint64(g+10), 2000, func() {}, func() {}); err != nil {
				errs <- err
			}
			if err := h.Check(); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
