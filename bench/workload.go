package bench

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync/atomic"

	"github.com/carvelab/carve/internal/churn"
)

// Load is the value-store workload. Its keys are 0 to 2 Values - 1; the
// fill sets the first Values of them, each to a value of a size drawn
// from churn.SizeAtMost(MaxValue) (log-normal, median 512 B, 32 B to
// 65,523 B), whose first 8 bytes are its key. Each operation of the
// churn picks a key uniformly and, by turns drawn at random, gets it
// (half the operations), sets it to a value of a new size (a quarter) or
// deletes it (a quarter): sets and deletes balance, so about Values keys
// stay present, and about half the gets find nothing to find. Any worker
// gets any key; each key is set and deleted by one worker only (the
// keys congruent to its number modulo the workers), so that the load
// knows each key's state exactly and a get that misses a present key is
// a value the store lost, not a race of the load's own.
type Load struct {
	store Store
	keys  uint64
	// state is, per key, the count of its sets and deletes (high 32 bits)
	// and its value's size (low 32 bits; 0 when absent). Its one writer
	// updates it after a set reaches the store and before a delete does.
	state []atomic.Uint64
	src   []byte // the bytes values are made of
}

func size(state uint64) int { return int(uint32(state)) }

// NewLoad returns the load of values values over store, unfilled.
func NewLoad(store Store, values int) *Load {
	l := &Load{store: store, keys: 2 * uint64(values), state: make([]atomic.Uint64, 2*values), src: make([]byte, MaxValue)}
	r := rand.New(rand.NewPCG(7, 7))
	for i := range l.src {
		l.src[i] = byte(r.Uint32())
	}
	return l
}

// Expect returns the store's sizing for a load of values values and ops
// operations of churn.
func Expect(values, ops int) Sizing {
	mean := churn.MeanSize()
	return Sizing{Values: values, Live: int64(float64(values) * mean), Written: int64(float64(values+ops/4) * mean)}
}

// Worker is one goroutine's part of the load: its random source, its
// value buffer and its counts, on cache lines of its own.
type Worker struct {
	l      *Load
	id, of uint64 // the worker's number, of how many: the keys it writes
	r      *rand.Rand
	buf    []byte // what set gives the store: the key, then src's bytes
	dst    []byte // what get copies values into
	Counts
	_ [64]byte
}

// Counts are what a worker counted.
type Counts struct {
	Gets, Hits int64
	// Lost counts the gets that missed a key the load had set and not
	// deleted, whose state no write changed during the get: values the
	// store lost (evicted, dropped, or not yet applied).
	Lost    int64
	Sets    int64
	Written int64 // the bytes given to Set
	// Live is the change in the present values' bytes this worker made;
	// read it with atomic loads while the worker runs.
	Live atomic.Int64
}

// Add adds c's counts to the total t.
func (t *Counts) Add(c *Counts) {
	t.Gets += c.Gets
	t.Hits += c.Hits
	t.Lost += c.Lost
	t.Sets += c.Sets
	t.Written += c.Written
	t.Live.Add(c.Live.Load())
}

// NewWorker returns worker id of n, whose random choices come from seed.
// Fill may use any worker; Step's workers must be numbered 0 to n - 1.
func (l *Load) NewWorker(id, n int, seed uint64) *Worker {
	w := &Worker{l: l, id: uint64(id), of: uint64(n), r: rand.New(rand.NewPCG(seed, 0x5eed)), buf: make([]byte, MaxValue), dst: make([]byte, 0, MaxValue)}
	copy(w.buf, l.src)
	return w
}

// Fill sets keys lo to hi - 1, each to a fresh value.
func (w *Worker) Fill(lo, hi int) error {
	for k := lo; k < hi; k++ {
		if err := w.set(uint64(k)); err != nil {
			return err
		}
	}
	return nil
}

// Step makes one operation of the churn.
func (w *Worker) Step() error {
	x := w.r.Uint64()
	k := (x & (1<<32 - 1)) * w.l.keys >> 32
	op := x >> 62
	if op < 2 {
		return w.get(k)
	}
	// The worker's key nearest below k.
	if k = k - k%w.of + w.id; k >= w.l.keys {
		k -= w.of
	}
	if op == 2 {
		return w.set(k)
	}
	return w.del(k)
}

func (w *Worker) get(k uint64) error {
	before := w.l.state[k].Load()
	v, ok := w.l.store.Get(w.dst[:0], k)
	w.Gets++
	if ok {
		w.Hits++
		if len(v) < 8 || binary.LittleEndian.Uint64(v) != k || string(v[8:]) != string(w.l.src[8:len(v)]) {
			return fmt.Errorf("get(%d): a value of %d bytes that is not the key's", k, len(v))
		}
	} else if size(before) != 0 && w.l.state[k].Load() == before {
		w.Lost++
	}
	return nil
}

func (w *Worker) set(k uint64) error {
	n := churn.SizeAtMost(w.r, MaxValue)
	binary.LittleEndian.PutUint64(w.buf, k)
	if err := w.l.store.Set(k, w.buf[:n]); err != nil {
		return fmt.Errorf("set(%d, %d bytes): %w", k, n, err)
	}
	w.Sets++
	w.Written += int64(n)
	old := w.l.state[k].Load()
	w.l.state[k].Store((old>>32+1)<<32 | uint64(n))
	w.Live.Add(int64(n - size(old)))
	return nil
}

func (w *Worker) del(k uint64) error {
	old := w.l.state[k].Load()
	w.l.state[k].Store((old>>32 + 1) << 32)
	w.Live.Add(-int64(size(old)))
	if err := w.l.store.Del(k); err != nil {
		return fmt.Errorf("del(%d): %w", k, err)
	}
	return nil
}

// Verify checks, once no worker runs and the store's sets are applied,
// that every value is its own key's and that no deleted key has one; it
// returns the present keys whose value the store lost, those whose value
// is an older one of theirs (of another size: a store whose sets apply
// out of order), and the live bytes.
func (l *Load) Verify() (lost, stale int, live int64, err error) {
	var buf []byte
	for k := range l.keys {
		n := size(l.state[k].Load())
		v, ok := l.store.Get(buf[:0], k)
		buf = v
		switch {
		case n == 0 && ok:
			return 0, 0, 0, fmt.Errorf("key %d was deleted, and has a value of %d bytes", k, len(v))
		case n == 0:
		case !ok:
			lost++
		case len(v) < 8 || binary.LittleEndian.Uint64(v) != k || string(v[8:]) != string(l.src[8:len(v)]):
			return 0, 0, 0, fmt.Errorf("key %d: a value of %d bytes that is not its own", k, len(v))
		case len(v) != n:
			stale++
		}
		live += int64(n)
	}
	return lost, stale, live, nil
}
