package rows

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestQueue checks that a run's workers never replay two rows of this
// process at once, that rows in children go beside them, and that every
// row is handed out once.
func TestQueue(t *testing.T) {
	q := newQueue[int]()
	const n = 40
	for i := range n {
		q.add(i, i%3 != 0) // two in three in this process
	}
	var (
		inside, most atomic.Int32
		mu           sync.Mutex
		seen         = map[int]bool{}
		wg           sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			for {
				j, here, ok := q.take()
				if !ok {
					return
				}
				if here != (j%3 != 0) {
					t.Errorf("row %d handed out as in this process: %v", j, here)
				}
				mu.Lock()
				if seen[j] {
					t.Errorf("row %d handed out twice", j)
				}
				seen[j] = true
				mu.Unlock()
				if here {
					if k := inside.Add(1); k > most.Load() {
						most.Store(k)
					}
				}
				time.Sleep(100 * time.Microsecond)
				if here {
					inside.Add(-1)
				}
				q.done(here)
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Errorf("%d rows handed out, want %d", len(seen), n)
	}
	if most.Load() != 1 {
		t.Errorf("%d rows of this process replayed at once, want 1", most.Load())
	}
}
