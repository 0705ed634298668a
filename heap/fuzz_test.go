package heap_test

import (
	"errors"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/carvelab/carve/heap"
)

// FuzzHeap runs random sequences of Alloc, Free, Realloc, Trim and misuse,
// decoded from the input, against a reference model: a map from each live
// block's address to its extent and the id whose pattern fills it. After
// every operation the blocks must lie inside the heap's memory, aligned as
// asked, overlapping no other; the bytes written into them must be intact;
// Stats must agree with the model (Live exactly) and with its own
// equations; and Check must pass.
//
// Long runs: go test -run '^$' -fuzz FuzzHeap -fuzztime 2m ./heap
// (and again with -tags carvecheck).
func FuzzHeap(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s.cfg, s.ops)
	}
	f.Fuzz(func(t *testing.T, cfg byte, ops []byte) {
		runOps(t, cfg, ops)
	})
}

// TestRandomOps runs the fuzz body over pseudo-random inputs from a fixed
// seed: a few by default, many with CARVE_LONG=1.
func TestRandomOps(t *testing.T) {
	n := 24
	if testing.Short() {
		n = 4
	}
	if os.Getenv("CARVE_LONG") == "1" {
		n = 3000
	}
	r := rand.New(rand.NewPCG(19, 20))
	for i := range n {
		ops := make([]byte, r.IntN(1500))
		for j := range ops {
			ops[j] = byte(r.Uint32())
		}
		cfg := byte(r.Uint32())
		if !t.Run(strconv.Itoa(i), func(t *testing.T) { runOps(t, cfg, ops) }) {
			t.Logf("input %d: cfg %d, ops %q", i, cfg, ops)
			break
		}
	}
}

// A fuzz input is a configuration byte and a string of operations.
//
// cfg: limit = fuzzLimits[cfg % 3]; retain = fuzzRetains[cfg/3 % 3].
//
// Each operation is a kind byte, kind%8, and its arguments:
//
//	0, 1, 2  Alloc(size, align)      size: 3 bytes, align: 1 byte
//	3, 4     Free(live[idx])         idx: 1 byte
//	5        Realloc(live[idx], size)
//	6        misuse probe (variant: 1 byte), or a UsableSize check
//	7        Trim (kind/8 even), or verify every live block's bytes and the map
//
// A size is 2^e-scaled from 16 random bits with e = byte % 21: sizes from
// 0 to 1 MiB, with as many below 64 bytes as between 64 KiB and 1 MiB; a
// third of the sizes (e < 8) fall in the size classes. An alignment is 1
// to 16 for bytes under 192, else 1 to 4096.
var (
	fuzzLimits  = [3]int64{1 << 20, 8 << 20, 64 << 20}
	fuzzRetains = [3]int64{0, heap.DefaultRetain, 1 << 20}
)

var fuzzSeeds = []struct {
	cfg byte
	ops []byte
}{
	{0, []byte{0, 4, 1, 0, 0, 4, 1, 0, 0, 4, 1, 0, 3, 0, 0, 4, 1, 0, 7}},
	{1, []byte{0, 8, 200, 0, 0, 0, 4, 1, 0, 0, 0, 9, 7, 0, 200, 3, 0, 0, 10, 1, 0, 0, 3, 1, 6, 4, 6, 5, 6, 2, 15}},
	{2, []byte{0, 12, 3, 0, 0, 0, 6, 3, 0, 0, 0, 12, 3, 0, 0, 3, 1, 5, 0, 14, 9, 9, 6, 0, 6, 1, 6, 3, 7}},
	{3, []byte{0, 18, 0, 1, 255, 0, 5, 5, 5, 0, 0, 11, 77, 1, 0, 4, 0, 5, 0, 20, 255, 255, 6, 4, 6, 5, 15}},
	{4, []byte{0, 20, 255, 255, 0, 0, 20, 255, 255, 0, 3, 0, 0, 2, 1, 1, 0, 7, 0, 6, 7}},
	{5, []byte{0, 16, 1, 0, 0, 0, 16, 1, 0, 0, 0, 16, 1, 0, 0, 3, 1, 3, 0, 0, 17, 5, 0, 2, 6, 4, 15, 7}},
	{6, []byte{0, 5, 9, 9, 200, 0, 5, 9, 9, 210, 0, 5, 9, 9, 220, 3, 1, 0, 10, 1, 1, 250, 5, 1, 15, 3, 3, 6, 0}},
	{7, []byte{0, 3, 0, 40, 0, 0, 3, 0, 40, 0, 0, 3, 0, 40, 0, 3, 0, 3, 0, 3, 0, 6, 3, 6, 7, 6, 2, 15}},
	{8, []byte{0, 7, 1, 1, 0, 1, 7, 1, 1, 0, 2, 7, 1, 1, 0, 5, 0, 16, 128, 0, 5, 1, 6, 2, 0, 3, 1, 6, 3, 6, 4, 6, 5, 7}},
}

// modelBlock is what the model knows of a live block.
type modelBlock struct {
	b      []byte
	usable int
	small  bool // a slot of a size class; else a best-fit block, 8 bytes of header before it
	id     int
}

// runner holds a heap under test and its reference model.
type runner struct {
	t      *testing.T
	h      *heap.Heap
	other  *heap.Heap // for blocks of another heap
	limit  int64
	ops    []byte
	i      int
	live   map[uintptr]*modelBlock
	addrs  []uintptr // live blocks' addresses, sorted
	freed  []uintptr // recently freed addresses, for double frees
	bytes  int64     // the sum of the live blocks' lengths
	nextID int
}

func runOps(t *testing.T, cfg byte, ops []byte) {
	if len(ops) > 4096 {
		ops = ops[:4096]
	}
	r := &runner{t: t, ops: ops, live: map[uintptr]*modelBlock{}, limit: fuzzLimits[cfg%3]}
	r.h = newHeap(t, heap.Limit(r.limit), heap.Retain(min(fuzzRetains[cfg/3%3], r.limit)))
	r.other = newHeap(t, heap.Limit(1<<20))
	r.verify("New")
	for r.i < len(r.ops) {
		kind := r.byte()
		switch kind % 8 {
		case 0, 1, 2:
			r.alloc(r.size(), r.align())
		case 3, 4:
			if len(r.addrs) > 0 {
				r.free(r.addrs[int(r.byte())%len(r.addrs)])
			}
		case 5:
			if len(r.addrs) > 0 {
				r.realloc(r.addrs[int(r.byte())%len(r.addrs)], r.size())
			}
		case 6:
			r.probe(int(r.byte()))
		case 7:
			if kind/8%2 == 0 {
				r.trim()
			} else {
				r.verifyAll()
			}
		}
		r.verify("op at byte " + strconv.Itoa(r.i))
	}
	r.verifyAll()
	for len(r.addrs) > 0 {
		r.free(r.addrs[len(r.addrs)/2])
	}
	r.verify("freeing everything")
	st := r.h.Stats()
	if st.Used != 0 || st.Live != 0 || st.Slabs != 0 || st.FreeBlocks != 0 || st.Footprint > fuzzRetains[cfg/3%3] {
		t.Fatalf("Stats() after freeing everything = %+v, want no slab, no block, every free block merged into the top, at most the Retain resident", st.Stats)
	}
	if _, err := r.h.Trim(); err != nil || r.h.Footprint() != 0 {
		t.Fatalf("Trim() = %v, then Footprint() = %d, want nil, 0", err, r.h.Footprint())
	}
}

func (r *runner) byte() byte {
	if r.i >= len(r.ops) {
		return 0
	}
	c := r.ops[r.i]
	r.i++
	return c
}

func (r *runner) size() int {
	e := int(r.byte() % 21)
	v := int(r.byte())<<8 | int(r.byte())
	if e <= 16 {
		return v >> (16 - e)
	}
	return v << (e - 16)
}

func (r *runner) align() int {
	a := int(r.byte())
	if a < 192 {
		return 1 << (a % 5)
	}
	return 1 << (a % 13)
}

// isSmall reports whether a lies in the heap's small zone.
func (r *runner) isSmall(a uintptr) bool {
	lo, hi, _, _ := r.h.Zones()
	return a >= lo && a < hi
}

// extent returns the bytes a live block occupies: a best-fit block's
// header included.
func (m *modelBlock) extent() (lo, hi uintptr) {
	a := addr(m.b)
	if m.small {
		return a, a + uintptr(m.usable)
	}
	return a - 8, a + uintptr(m.usable)
}

// blockSize is the best-fit block a request of n bytes needs.
func blockSize(n int) int { return max((n+8+15)&^15, 32) }

// exhausted reports whether a request of need bytes may have been refused
// for the limit: the footprint was within need plus two pages of it.
func (r *runner) exhausted(err error, footprint int64, need int) bool {
	return errors.Is(err, heap.ErrExhausted) && footprint+int64(need)+2*heap.PageSize > r.limit
}

// alloc allocates, checks the block against the model and fills it.
func (r *runner) alloc(size, align int) {
	t := r.t
	fp := r.h.Footprint()
	b, err := r.h.Alloc(size, align)
	if err != nil {
		if b != nil || !r.exhausted(err, fp, size+align) {
			t.Fatalf("Alloc(%d, %d) = %#x, %v; want a block, or nil and %v with the footprint %d near the limit %d",
				size, align, addr(b), err, heap.ErrExhausted, fp, r.limit)
		}
		return
	}
	if len(b) != size || cap(b) != size || b == nil {
		t.Fatalf("Alloc(%d, %d) = len %d cap %d, want len == cap == %d, not nil", size, align, len(b), cap(b), size)
	}
	if addr(b)%uintptr(align) != 0 {
		t.Fatalf("Alloc(%d, %d) = %#x, not aligned", size, align, addr(b))
	}
	r.add(b, "Alloc")
}

// add checks a new block against the model and records it.
func (r *runner) add(b []byte, op string) {
	t := r.t
	a := addr(b)
	usable, err := r.h.UsableSize(b)
	small := r.isSmall(a)
	switch {
	case err != nil:
		t.Fatalf("%s(%d) = %#x: UsableSize = %v, want nil", op, len(b), a, err)
	case small && (usable < len(b) || slices.Index(heap.ClassSizes(), usable) < 0 || len(b) > heap.MaxSmall && usable-len(b) >= 8):
		t.Fatalf("%s(%d) = %#x, a slot of %d bytes: want a class size at least the request (above %d, less than 8 bytes more)", op, len(b), a, usable, heap.MaxSmall)
	case !small && (usable < blockSize(len(b))-8 || usable >= blockSize(len(b))-8+32):
		t.Fatalf("%s(%d): UsableSize = %d, want %d to %d", op, len(b), usable, blockSize(len(b))-8, blockSize(len(b))-8+31)
	case !r.h.Contains(at(b, 0, usable)):
		t.Fatalf("%s(%d) = [%#x, %#x), not inside the heap", op, len(b), a, a+uintptr(usable))
	}
	m := &modelBlock{b: b, usable: usable, small: small, id: r.nextID}
	lo, hi := m.extent()
	pos, found := slices.BinarySearch(r.addrs, a)
	if found {
		t.Fatalf("%s(%d) = %#x, a live block's address", op, len(b), a)
	}
	if pos > 0 {
		if _, phi := r.live[r.addrs[pos-1]].extent(); phi > lo {
			t.Fatalf("%s(%d) = [%#x, %#x), which overlaps the live block at %#x", op, len(b), lo, hi, r.addrs[pos-1])
		}
	}
	if pos < len(r.addrs) {
		if nlo, _ := r.live[r.addrs[pos]].extent(); hi > nlo {
			t.Fatalf("%s(%d) = [%#x, %#x), which overlaps the live block at %#x", op, len(b), lo, hi, r.addrs[pos])
		}
	}
	r.addrs = slices.Insert(r.addrs, pos, a)
	fill(b, r.nextID)
	r.live[a] = m
	r.nextID++
	r.bytes += int64(len(b))
}

// drop checks that the live block at a kept its bytes and forgets it.
func (r *runner) drop(a uintptr, keep int) *modelBlock {
	m := r.live[a]
	if i := intact(m.b[:keep], m.id); i >= 0 {
		r.t.Fatalf("block %#x (id %d): byte %d = %#x, want %#x", a, m.id, i, m.b[i], pattern(m.id, i))
	}
	delete(r.live, a)
	pos, _ := slices.BinarySearch(r.addrs, a)
	r.addrs = slices.Delete(r.addrs, pos, pos+1)
	r.bytes -= int64(len(m.b))
	return m
}

func (r *runner) forget(a uintptr) {
	if len(r.freed) == 16 {
		r.freed = r.freed[1:]
	}
	r.freed = append(r.freed, a)
}

func (r *runner) free(a uintptr) {
	m := r.drop(a, len(r.live[a].b))
	if err := r.h.Free(m.b); err != nil {
		r.t.Fatalf("Free(%#x) = %v, want nil", a, err)
	}
	r.forget(a)
}

func (r *runner) realloc(a uintptr, size int) {
	t := r.t
	m := r.live[a]
	fp := r.h.Footprint()
	b, err := r.h.Realloc(m.b, size)
	if err != nil {
		if b != nil || !r.exhausted(err, fp, size) {
			t.Fatalf("Realloc(%#x, %d) = %#x, %v; want a block, or nil and %v with the footprint %d near the limit %d",
				a, size, addr(b), err, heap.ErrExhausted, fp, r.limit)
		}
		if i := intact(m.b, m.id); i >= 0 {
			t.Fatalf("block %#x lost byte %d in a failed Realloc", a, i)
		}
		return
	}
	if len(b) != size || cap(b) != size || b == nil || addr(b)%8 != 0 {
		t.Fatalf("Realloc(%#x, %d) = %#x len %d cap %d, want len == cap == %d, aligned to 8", a, size, addr(b), len(b), cap(b), size)
	}
	keep := min(len(m.b), size)
	r.drop(a, 0)
	if i := intact(b[:keep], m.id); i >= 0 {
		t.Fatalf("Realloc(%#x, %d) = %#x: byte %d = %#x, want %#x kept", a, size, addr(b), i, b[i], pattern(m.id, i))
	}
	if addr(b) != a {
		r.forget(a)
	}
	r.add(b, "Realloc")
}

// covering returns the live block whose extent holds address a, if any.
func (r *runner) covering(a uintptr) *modelBlock {
	pos, _ := slices.BinarySearch(r.addrs, a+1)
	for _, i := range []int{pos - 1, pos} {
		if i >= 0 && i < len(r.addrs) {
			if m := r.live[r.addrs[i]]; m != nil {
				if lo, hi := m.extent(); a >= lo && a < hi {
					return m
				}
			}
		}
	}
	return nil
}

// probe hands Free, Realloc and UsableSize what they must refuse, and
// checks that they refuse it with the right error and change nothing.
func (r *runner) probe(v int) {
	t := r.t
	var b []byte
	want := []error{heap.ErrForeign}
	var some *modelBlock
	if len(r.addrs) > 0 {
		some = r.live[r.addrs[v%len(r.addrs)]]
	}
	switch v % 8 {
	case 0:
		b = nil
	case 1:
		b = make([]byte, 32)
	case 2, 3: // inside a live block
		if some == nil || some.usable < 2 {
			return
		}
		b = at(some.b, 1+v%(some.usable-1), 8)
	case 4: // a freed block: a double free unless its place is taken
		if len(r.freed) == 0 {
			return
		}
		a := r.freed[v%len(r.freed)]
		if _, ok := r.live[a]; ok {
			return // handed out again: freeing it would be legal
		}
		switch {
		case r.covering(a) != nil:
			// inside the block in use that took its place
		case r.isSmall(a):
			// A slot freed, or a free page; or, once its page is a slab
			// of another class, no slot's start.
			want = []error{heap.ErrDoubleFree, heap.ErrForeign}
		default:
			want = []error{heap.ErrDoubleFree}
		}
		b = r.h.At(a, 8)
	case 5: // the top
		_, _, lo, hi := r.h.Zones()
		if lo+uintptr(r.h.TopOffset()) >= hi {
			return
		}
		want = []error{heap.ErrDoubleFree}
		b = r.h.At(lo+uintptr(r.h.TopOffset()), 8)
	case 6:
		if some == nil {
			return
		}
		if u, err := r.h.UsableSize(some.b); u != some.usable || err != nil {
			t.Fatalf("UsableSize(%#x) = %d, %v, want %d, nil", addr(some.b), u, err, some.usable)
		}
		return
	case 7:
		o, err := r.other.Alloc(v*37, 1)
		if err != nil {
			return
		}
		b = o
	}
	is := func(err error) bool {
		for _, w := range want {
			if errors.Is(err, w) {
				return true
			}
		}
		return false
	}
	before := r.h.Stats()
	if err := r.h.Free(b); !is(err) {
		t.Fatalf("Free(%#x) (probe %d) = %v, want one of %v", addr(b), v%8, err, want)
	}
	if got, err := r.h.Realloc(b, v); got != nil || !is(err) {
		t.Fatalf("Realloc(%#x, %d) (probe %d) = %#x, %v, want nil, one of %v", addr(b), v, v%8, addr(got), err, want)
	}
	if n, err := r.h.UsableSize(b); n != 0 || !is(err) {
		t.Fatalf("UsableSize(%#x) (probe %d) = %d, %v, want 0, one of %v", addr(b), v%8, n, err, want)
	}
	if after := r.h.Stats(); !reflect.DeepEqual(after, before) {
		t.Fatalf("Stats() after refused calls (probe %d) = %+v, want unchanged %+v", v%8, after.Stats, before.Stats)
	}
}

// trim gives every free page back and checks that nothing else moved.
func (r *runner) trim() {
	t := r.t
	before := r.h.Stats()
	n, err := r.h.Trim()
	if err != nil {
		t.Fatalf("Trim() = %v, want nil", err)
	}
	after := r.h.Stats()
	if after.Footprint != before.Footprint-n || after.Used != before.Used || after.Dirty != 0 || n != before.Dirty {
		t.Fatalf("Trim() = %d: Stats() went from %+v (dirty %d) to %+v (dirty %d), want the dirty pages given back, nothing else changed",
			n, before.Stats, before.Dirty, after.Stats, after.Dirty)
	}
	r.verifyAll()
}

// verify checks the heap's invariants and counts against the model.
func (r *runner) verify(step string) {
	t := r.t
	t.Helper()
	mustCheck(t, r.h, step)
	st := checkStats(t, r.h)
	if st.Live != r.bytes || st.Slots+st.Blocks != int64(len(r.live)) {
		t.Fatalf("Stats() after %s = Live %d, %d slots and %d blocks, want %d, %d", step, st.Live, st.Slots, st.Blocks, r.bytes, len(r.live))
	}
}

// verifyAll checks every live block's bytes as well (all of them in
// blocks up to 4 KiB, the first and the last KiB of larger ones, so that an
// input cannot spend minutes rereading a full heap; Free and Realloc check
// every byte of the blocks they take), and the heap's map.
func (r *runner) verifyAll() {
	for _, a := range r.addrs {
		m := r.live[a]
		i := -1
		if n := len(m.b); n <= 4096 {
			i = intact(m.b, m.id)
		} else if i = intact(m.b[:1024], m.id); i < 0 {
			for j := n - 1024; j < n && i < 0; j++ {
				if m.b[j] != pattern(m.id, j) {
					i = j
				}
			}
		}
		if i >= 0 {
			r.t.Fatalf("block %#x (id %d): byte %d = %#x, want %#x", a, m.id, i, m.b[i], pattern(m.id, i))
		}
	}
	checkMap(r.t, r.h)
}
