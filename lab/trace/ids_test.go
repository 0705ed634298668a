package trace

import (
	"encoding/binary"
	"maps"
	"math/rand/v2"
	"testing"
)

// checkIDs compares t with want, the reference model.
func checkIDs(t *testing.T, ids *IDs[int], want map[uint64]int) {
	t.Helper()
	if ids.Len() != len(want) {
		t.Fatalf("Len %d, want %d", ids.Len(), len(want))
	}
	for id, v := range want {
		if got, ok := ids.Get(id); !ok || got != v {
			t.Fatalf("Get(%d) = %d, %v; want %d, true", id, got, ok, v)
		}
	}
	seen := map[uint64]int{}
	ids.All(func(id uint64, v int) bool {
		if _, dup := seen[id]; dup {
			t.Fatalf("All yields %d twice", id)
		}
		seen[id] = v
		return true
	})
	if !maps.Equal(seen, want) {
		t.Fatalf("All yields %d IDs, want %d", len(seen), len(want))
	}
}

// applyIDs applies ops (id, op: set to v, or delete) to both.
func applyIDs(ids *IDs[int], want map[uint64]int, id uint64, del bool, v int) {
	if del {
		ids.Delete(id)
		delete(want, id)
		return
	}
	ids.Set(id, v)
	want[id] = v
}

func TestIDs(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   func(r *rand.Rand, i int) uint64
	}{
		{"in order", func(r *rand.Rand, i int) uint64 { return uint64(i/2 + 1) }},
		{"scattered over the dense range", func(r *rand.Rand, i int) uint64 { return r.Uint64N(DenseIDs) }},
		{"above the dense range", func(r *rand.Rand, i int) uint64 { return DenseIDs + r.Uint64N(1<<40) }},
		{"both", func(r *rand.Rand, i int) uint64 {
			if i%3 == 0 {
				return r.Uint64N(1 << 62)
			}
			return uint64(i)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			var ids IDs[int]
			want := map[uint64]int{}
			var live []uint64
			for i := range 200_000 {
				if len(live) > 0 && r.IntN(3) == 0 {
					k := r.IntN(len(live))
					id := live[k]
					live[k] = live[len(live)-1]
					live = live[:len(live)-1]
					applyIDs(&ids, want, id, true, 0)
					applyIDs(&ids, want, id, true, 0) // deleting what is gone changes nothing
					continue
				}
				id := tc.id(r, i)
				if _, ok := want[id]; !ok {
					live = append(live, id)
				}
				applyIDs(&ids, want, id, false, i)
			}
			checkIDs(t, &ids, want)
			// Scattered IDs go to the map once the pages would be sparse.
			if ids.npages > minDensity && ids.npages*PageIDs/minDensity > ids.inPage+PageIDs {
				t.Errorf("%d pages for %d IDs in them", ids.npages, ids.inPage)
			}
			for _, id := range live {
				applyIDs(&ids, want, id, true, 0)
			}
			checkIDs(t, &ids, want)
			if ids.npages != 0 {
				t.Errorf("%d pages left in an empty table", ids.npages)
			}
		})
	}
}

// FuzzIDs checks a table against a map under any sequence of sets and
// deletes: each 9 bytes of the input are an op (odd: delete) and an ID.
func FuzzIDs(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		var ids IDs[int]
		want := map[uint64]int{}
		for i := 0; i+9 <= len(in); i += 9 {
			id := binary.LittleEndian.Uint64(in[i+1:])
			if in[i]&2 == 0 {
				id %= 3 * PageIDs // dense and close, so that pages fill and empty
			}
			applyIDs(&ids, want, id, in[i]&1 == 1, i)
		}
		checkIDs(t, &ids, want)
	})
}
