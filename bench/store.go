package bench

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/fastcache"
	"github.com/dgraph-io/ristretto/v2"

	"github.com/carvelab/carve/heap"
)

// A Store maps uint64 keys to byte values, for goroutines that share it.
// Set copies the value; Get appends the value to dst. Every method is
// safe for concurrent use.
type Store interface {
	Set(k uint64, v []byte) error
	Get(dst []byte, k uint64) ([]byte, bool)
	Del(k uint64) error
	// Lost returns what the store itself counts of the values it did not
	// keep: entries evicted, and sets it dropped or rejected (ristretto's
	// figures; the others count none).
	Lost() (evicted, dropped int64)
	Close() error
}

// MaxValue is the largest value the stores are given (65,523 bytes):
// fastcache's Set drops, without a word, an entry whose 4-byte header,
// 8-byte key and value reach 64 KiB. Every store is given the same
// values, so the value sizes are capped for all of them (its SetBig
// stores larger values in a format its Get cannot read).
const MaxValue = 1<<16 - 4 - 8 - 1

// Stores are the stores the benchmark compares, in its order. Sizing
// says how many values of what mean size the store will hold, and how
// many bytes will be set over the run (for fastcache's ring).
var Stores = []struct {
	Name string
	New  func(Sizing) (Store, error)
}{
	{"carve", newCarve},
	{"gomap", newGoMap},
	{"fastcache", newFastcache},
	{"ristretto", newRistretto},
}

// NewStore returns the store named name.
func NewStore(name string, sz Sizing) (Store, error) {
	for _, s := range Stores {
		if s.Name == name {
			return s.New(sz)
		}
	}
	return nil, fmt.Errorf("no store %q", name)
}

// Sizing is what a store is told of the load before it starts.
type Sizing struct {
	Values  int   // values present at once
	Live    int64 // their bytes
	Written int64 // the bytes Set will be given over the whole run
}

// mapShards is how many shards the map of carve's store and the Go map
// have: enough that goroutines on different keys seldom share one.
const mapShards = 256

// shardOf returns the map shard of key k: a multiplicative hash, so that
// consecutive keys spread.
func shardOf(k uint64) int { return int((k * 0x9E3779B97F4A7C15) >> 56) }

// mapShard is one shard of a sharded map of slices, padded off its
// neighbours' cache lines.
type mapShard struct {
	mu sync.Mutex
	m  map[uint64][]byte
	_  [48]byte
}

// shardedMap is the map from keys to value slices that carve's store and
// the Go map share: the same sharding, so that they differ only in where
// the values' bytes are.
type shardedMap [mapShards]mapShard

func newShardedMap(values int) *shardedMap {
	var m shardedMap
	for i := range m {
		m[i].m = make(map[uint64][]byte, values/mapShards+values/mapShards/4)
	}
	return &m
}

// swap sets k's slice to v (or deletes k, for v nil) and returns the old
// one.
func (m *shardedMap) swap(k uint64, v []byte) []byte {
	s := &m[shardOf(k)]
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.m[k]
	if v == nil {
		delete(s.m, k)
	} else {
		s.m[k] = v
	}
	return old
}

// get appends k's value to dst under the shard's lock: the value cannot
// be freed while it is copied.
func (m *shardedMap) get(dst []byte, k uint64) ([]byte, bool) {
	s := &m[shardOf(k)]
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[k]
	return append(dst, v...), ok
}

// carveStore keeps the values' bytes in a heap.Shared: the map's slices
// point into it, and it holds no Go pointer. A value replaced or deleted
// is freed once the map no longer holds it, so no reader can be copying
// it (get copies under the shard's lock).
type carveStore struct {
	m *shardedMap
	h *heap.Shared
}

func newCarve(sz Sizing) (Store, error) {
	h, err := heap.NewShared()
	if err != nil {
		return nil, err
	}
	return &carveStore{m: newShardedMap(sz.Values), h: h}, nil
}

func (s *carveStore) Set(k uint64, v []byte) error {
	b, err := s.h.Alloc(len(v), 1)
	if err != nil {
		return err
	}
	copy(b, v)
	if old := s.m.swap(k, b); old != nil {
		return s.h.Free(old)
	}
	return nil
}

func (s *carveStore) Get(dst []byte, k uint64) ([]byte, bool) { return s.m.get(dst, k) }

func (s *carveStore) Del(k uint64) error {
	if old := s.m.swap(k, nil); old != nil {
		return s.h.Free(old)
	}
	return nil
}

func (s *carveStore) Lost() (int64, int64) { return 0, 0 }

func (s *carveStore) Close() error {
	s.m = nil
	return s.h.Close()
}

// Heap returns the store's heap, for its statistics.
func (s *carveStore) Heap() *heap.Shared { return s.h }

// goMapStore keeps each value in a slice of its own on the Go heap.
type goMapStore struct{ m *shardedMap }

func newGoMap(sz Sizing) (Store, error) { return &goMapStore{newShardedMap(sz.Values)}, nil }

func (s *goMapStore) Set(k uint64, v []byte) error {
	s.m.swap(k, append([]byte(nil), v...))
	return nil
}

func (s *goMapStore) Get(dst []byte, k uint64) ([]byte, bool) { return s.m.get(dst, k) }

func (s *goMapStore) Del(k uint64) error {
	s.m.swap(k, nil)
	return nil
}

func (s *goMapStore) Lost() (int64, int64) { return 0, 0 }
func (s *goMapStore) Close() error         { s.m = nil; return nil }

// fastcacheStore is a fastcache.Cache: 512 buckets, each a ring of 64 KiB
// chunks mmap'd off the Go heap, to which every Set appends. Del forgets
// the key and reclaims nothing; a bucket whose ring wraps overwrites its
// oldest entries, present or not. Its size is the bytes the run will set
// times fastcacheRing (at least fastcacheMin): a ring of 0.75 lost more
// than 1% of the gets of present keys in TestStores; at 1.0 the child's
// run of BenchmarkValueStore kept 99.6% hitting, its in-process runs
// 98.9-99.4% (it reports hit-%; TestStores checks 99%).
type fastcacheStore struct{ c *fastcache.Cache }

// fastcacheRing is the ring's size over the bytes the run sets;
// fastcacheMin is its least size: four 64 KiB chunks for each of its 512
// buckets (a bucket of one chunk loses the whole chunk when it wraps).
const (
	fastcacheRing = 1.0
	fastcacheMin  = 512 * 4 << 16
)

func newFastcache(sz Sizing) (Store, error) {
	n := int64(float64(sz.Written) * fastcacheRing)
	return &fastcacheStore{fastcache.New(int(max(n, fastcacheMin)))}, nil
}

func (s *fastcacheStore) Set(k uint64, v []byte) error {
	var kb [8]byte
	binary.LittleEndian.PutUint64(kb[:], k)
	s.c.Set(kb[:], v)
	return nil
}

func (s *fastcacheStore) Get(dst []byte, k uint64) ([]byte, bool) {
	var kb [8]byte
	binary.LittleEndian.PutUint64(kb[:], k)
	return s.c.HasGet(dst, kb[:])
}

func (s *fastcacheStore) Del(k uint64) error {
	var kb [8]byte
	binary.LittleEndian.PutUint64(kb[:], k)
	s.c.Del(kb[:])
	return nil
}

func (s *fastcacheStore) Lost() (int64, int64) { return 0, 0 }

func (s *fastcacheStore) Close() error {
	s.c.Reset()
	return nil
}

// ristrettoStore is a ristretto.Cache of []byte copies on the Go heap,
// each costing its length, with room (MaxCost) for every byte the run
// sets (at least twice the live bytes), so that nothing need be evicted:
// its deletes reach its policy through the same buffer as its sets, so
// with a MaxCost of twice the live bytes it still evicted, counting
// deleted values' cost until their delete was applied. Set is asynchronous: a value is
// visible once ristretto's goroutine has taken it from its buffer, and
// Set returns false when it dropped the value (its buffer full); a value
// its policy rejects later (OnReject) counts as dropped too. After Wait,
// some keys set more than once hold an older value (Load.Verify counts
// them as stale).
//
// Its metrics count a delete as an eviction (KeysEvicted), so evictions
// are counted here by its OnEvict hook, rejections by OnReject.
type ristrettoStore struct {
	c                 *ristretto.Cache[uint64, []byte]
	nDrop             atomic.Int64 // Sets that returned false
	evicted, rejected atomic.Int64
}

func newRistretto(sz Sizing) (Store, error) {
	s := &ristrettoStore{}
	c, err := ristretto.NewCache(&ristretto.Config[uint64, []byte]{
		NumCounters:        int64(10 * sz.Values),
		MaxCost:            max(2*sz.Live, sz.Written),
		BufferItems:        64,
		IgnoreInternalCost: true,
		OnEvict:            func(*ristretto.Item[[]byte]) { s.evicted.Add(1) },
		OnReject:           func(*ristretto.Item[[]byte]) { s.rejected.Add(1) },
	})
	if err != nil {
		return nil, err
	}
	s.c = c
	return s, nil
}

func (s *ristrettoStore) Set(k uint64, v []byte) error {
	if !s.c.Set(k, append([]byte(nil), v...), int64(len(v))) {
		s.nDrop.Add(1)
	}
	return nil
}

func (s *ristrettoStore) Get(dst []byte, k uint64) ([]byte, bool) {
	v, ok := s.c.Get(k)
	return append(dst, v...), ok
}

func (s *ristrettoStore) Del(k uint64) error {
	s.c.Del(k)
	return nil
}

// Wait waits for the sets in ristretto's buffers to be applied.
func (s *ristrettoStore) Wait() { s.c.Wait() }

func (s *ristrettoStore) Lost() (evicted, dropped int64) {
	return s.evicted.Load(), s.nDrop.Load() + s.rejected.Load()
}

func (s *ristrettoStore) Close() error {
	s.c.Close()
	return nil
}

// waiter is a store whose sets apply later; Wait waits for them.
type waiter interface{ Wait() }

// Wait waits for s's pending sets, if it has any.
func Wait(s Store) {
	if w, ok := s.(waiter); ok {
		w.Wait()
	}
}
