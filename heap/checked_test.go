//go:build carvecheck

package heap_test

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/carvelab/carve/heap"
	"github.com/carvelab/carve/internal/heaptest"
)

// The tests of checked builds (-tags carvecheck): freed slots and blocks
// are poisoned, and memory written after free is caught when it is handed
// out again.

func TestPoisonSlot(t *testing.T) {
	h := newHeap(t)
	keep, _ := h.Alloc(64, 1)
	b, _ := h.Alloc(64, 1)
	heaptest.Fill(b, 1)
	h.Free(b)
	if i := heaptest.Poisoned(b); i >= 0 {
		t.Fatalf("freed slot byte %d = %#x, want poison", i, b[i])
	}
	b[10] = 0 // written after free
	heaptest.MustPanic(t, "written after free", func() { h.Alloc(64, 1) })
	_ = keep
}

func TestPoisonBlock(t *testing.T) {
	h := newHeap(t)
	b, _ := h.Alloc(3000, 1)
	guard, _ := h.Alloc(3000, 1)
	heaptest.Fill(b, 1)
	h.Free(b)
	if i := heaptest.Poisoned(b[8 : 3000-16]); i >= 0 {
		t.Fatalf("freed block byte %d = %#x, want poison", 8+i, b[8+i])
	}
	b[100] = 0 // written after free
	heaptest.MustPanic(t, "written after free", func() { h.Alloc(3000, 1) })
	_ = guard
}

// TestSharedPoison writes into a block of a Shared heap after another
// goroutine freed it: the goroutine whose Alloc hands the slot out again
// panics, naming the write after free.
func TestSharedPoison(t *testing.T) {
	s, err := heap.NewShared(heap.Shards(1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	keep, _ := s.Alloc(64, 1)
	b, _ := s.Alloc(64, 1)
	done := make(chan error)
	go func() { done <- s.Free(b) }()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	b[10] = 0 // written after another goroutine freed it
	heaptest.MustPanic(t, "written after free", func() { s.Alloc(64, 1) })
	_ = keep
}

// TestBusy holds the heap's busy mark from another goroutine, as a call
// running there would, and checks that every call refuses to run: those
// that return an error return ErrBusy, Stats and Map panic, and nothing
// changes.
func TestBusy(t *testing.T) {
	h := newHeap(t)
	slot := mustAlloc(t, h, 48, 1)
	block := mustAlloc(t, h, 3000, 1)
	before := h.Stats()
	held, release, done := make(chan struct{}), make(chan struct{}), make(chan error)
	go func() {
		err := h.Enter()
		close(held)
		<-release
		if err == nil {
			h.Leave()
		}
		done <- err
	}()
	<-held
	calls := []struct {
		name string
		call func() error
	}{
		{"Alloc(48)", func() error { _, err := h.Alloc(48, 1); return err }},
		{"Alloc(5000)", func() error { _, err := h.Alloc(5000, 1); return err }},
		{"Free(slot)", func() error { return h.Free(slot) }},
		{"Free(block)", func() error { return h.Free(block) }},
		{"Realloc(slot)", func() error { _, err := h.Realloc(slot, 100); return err }},
		{"Realloc(block)", func() error { _, err := h.Realloc(block, 10000); return err }},
		{"UsableSize", func() error { _, err := h.UsableSize(slot); return err }},
		{"Trim", func() error { _, err := h.Trim(); return err }},
		{"Close", func() error { return h.Close() }},
	}
	for _, c := range calls {
		if err := c.call(); !errors.Is(err, heap.ErrBusy) {
			t.Errorf("%s while another goroutine is in the heap = %v, want %v", c.name, err, heap.ErrBusy)
		}
	}
	heaptest.MustPanic(t, heap.ErrBusy.Error(), func() { h.Stats() })
	heaptest.MustPanic(t, heap.ErrBusy.Error(), func() { h.Map() })
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Enter() in the other goroutine = %v, want nil", err)
	}
	heaptest.MustCheck(t, h, "the busy calls")
	if after := checkStats(t, h); after.Stats != before.Stats || after.Slots != before.Slots || after.Blocks != before.Blocks {
		t.Fatalf("Stats() after the busy calls = %+v, want %+v", after.Stats, before.Stats)
	}
	for _, b := range [][]byte{slot, block} {
		if err := h.Free(b); err != nil {
			t.Fatalf("Free(%#x) once the heap is idle = %v, want nil", heaptest.Addr(b), err)
		}
	}
}

// TestUnlockedSharing shares one Heap between two goroutines, which the
// contract forbids: in a checked build each call runs alone or is refused
// with ErrBusy, changing nothing, so the heap stays whole and Live exact
// (in release builds the two corrupt the heap: a fault, or overlapping
// blocks). Run it with -race too: the heap's Go memory is only touched
// inside the busy mark.
func TestUnlockedSharing(t *testing.T) {
	h := newHeap(t)
	const n = 20000
	var busy atomic.Int64
	// retry runs call until it is not refused for ErrBusy.
	retry := func(call func() error) error {
		for {
			err := call()
			if !errors.Is(err, heap.ErrBusy) {
				return err
			}
			busy.Add(1)
			runtime.Gosched()
		}
	}
	held := make([][][]byte, 2)
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine [][]byte
			for i := range n {
				size := (i*37 + g*101) % 6000
				if i%3 == 0 {
					size %= 256 // a slot
				}
				b, err := h.Alloc(size, 1)
				switch {
				case errors.Is(err, heap.ErrBusy):
					busy.Add(1)
					continue
				case err != nil:
					t.Errorf("goroutine %d: Alloc(%d) = %v, want nil or %v", g, size, err, heap.ErrBusy)
					return
				}
				heaptest.Fill(b, g)
				mine = append(mine, b)
				if len(mine) > 64 {
					x := mine[i%len(mine)]
					if heaptest.Intact(x, g) >= 0 {
						t.Errorf("goroutine %d: a block of %d bytes lost its bytes", g, len(x))
						return
					}
					if err := retry(func() error { return h.Free(x) }); err != nil {
						t.Errorf("goroutine %d: Free = %v, want nil", g, err)
						return
					}
					mine[i%len(mine)] = mine[len(mine)-1]
					mine = mine[:len(mine)-1]
				}
			}
			held[g] = mine
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d calls refused with ErrBusy", busy.Load())
	var live int64
	for _, mine := range held {
		for _, b := range mine {
			live += int64(len(b))
		}
	}
	wantLive(t, h, "the two goroutines", live)
	for g, mine := range held {
		for _, b := range mine {
			if heaptest.Intact(b, g) >= 0 {
				t.Fatalf("goroutine %d: a block of %d bytes lost its bytes", g, len(b))
			}
			if err := h.Free(b); err != nil {
				t.Fatal(err)
			}
		}
	}
	wantLive(t, h, "freeing everything", 0)
}
