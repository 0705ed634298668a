package fit_test

import (
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/carvelab/carve/fit"
)

// FuzzFit runs random sequences of Alloc, Free, Realloc, Trim and misuse,
// decoded from the input, against a reference model: a map from each live
// block's address to its extent and the id whose pattern fills it. After
// every operation the blocks must lie inside the heap's committed memory,
// aligned as asked, overlapping no other; the bytes written into them must
// be intact; Stats must agree with the model (Live exactly) and with its
// own equations; and Check must pass.
//
// Long runs: go test -run '^$' -fuzz FuzzFit -fuzztime 2m ./fit
// (and again with -tags carvecheck).
func FuzzFit(f *testing.F) {
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
		n = 5000
	}
	r := rand.New(rand.NewPCG(3, 4))
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
// cfg: policy = cfg % 4; limit = fuzzLimits[cfg/4 % 3];
// trimming = cfg/16 % 4 (default; threshold 0 and no pad; never; 64 KiB
// threshold and 16 KiB pad).
//
// Each operation is a kind byte, kind%8, and its arguments:
//
//	0, 1, 2  Alloc(size, align)      size: 3 bytes, align: 1 byte
//	3, 4     Free(live[idx])         idx: 1 byte
//	5        Realloc(live[idx], size)
//	6        misuse probe (variant: 1 byte), or a UsableSize check
//	7        Trim (kind/8 even), or verify every live block's bytes
//
// A size is 2^e-scaled from 16 random bits with e = byte % 21: sizes from
// 0 to 1 MiB, as many below 64 bytes as between 64 KiB and 1 MiB. An
// alignment is 1 to 16 for bytes under 192, else 1 to 4096.
var fuzzLimits = [3]int64{1 << 20, 8 << 20, 64 << 20}

var fuzzSeeds = []struct {
	cfg byte
	ops []byte
}{
	{0, []byte{0, 4, 1, 0, 0, 4, 1, 0, 0, 4, 1, 0, 3, 0, 0, 4, 1, 0, 7}},
	{1, []byte{0, 8, 200, 0, 0, 0, 4, 1, 0, 0, 0, 9, 7, 0, 200, 3, 0, 0, 10, 1, 0, 0, 3, 1, 6, 4, 6, 5, 6, 2, 15}},
	{2, []byte{0, 12, 3, 0, 0, 0, 6, 3, 0, 0, 0, 12, 3, 0, 0, 3, 1, 5, 0, 14, 9, 9, 6, 0, 6, 1, 6, 3, 7}},
	{3, []byte{0, 18, 0, 1, 255, 0, 5, 5, 5, 0, 0, 11, 77, 1, 0, 4, 0, 5, 0, 20, 255, 255, 6, 4, 6, 5, 15}},
	{4*1 + 16*1 + 2, []byte{0, 20, 255, 255, 0, 0, 20, 255, 255, 0, 3, 0, 0, 2, 1, 1, 0, 7, 0, 6, 7}},
	{4*2 + 16*2 + 3, []byte{0, 16, 1, 0, 0, 0, 16, 1, 0, 0, 0, 16, 1, 0, 0, 3, 1, 3, 0, 0, 17, 5, 0, 2, 6, 4, 15, 7}},
	{16*3 + 1, []byte{0, 5, 9, 9, 200, 0, 5, 9, 9, 210, 0, 5, 9, 9, 220, 3, 1, 0, 10, 1, 1, 250, 5, 1, 15, 3, 3, 6, 0}},
}

// modelBlock is what the model knows of a live block.
type modelBlock struct {
	b      []byte
	usable int
	id     int
}

// runner holds a heap under test and its reference model.
type runner struct {
	t      *testing.T
	h      *fit.Heap
	other  *fit.Heap // for blocks of another heap
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
	policy := fit.Policies()[cfg%4]
	r := &runner{t: t, ops: ops, live: map[uintptr]*modelBlock{}, limit: fuzzLimits[cfg/4%3]}
	opts := []fit.Option{fit.Limit(r.limit)}
	switch cfg / 16 % 4 {
	case 1:
		opts = append(opts, fit.TrimThreshold(0), fit.TopPad(0))
	case 2:
		opts = append(opts, fit.TrimThreshold(-1))
	case 3:
		opts = append(opts, fit.TrimThreshold(64<<10), fit.TopPad(16<<10))
	}
	h, err := fit.New(policy, opts...)
	if err != nil {
		t.Fatalf("New(%v) = %v, want nil", policy, err)
	}
	defer h.Close()
	r.h = h
	if r.other, err = fit.New(policy, fit.Limit(1<<20)); err != nil {
		t.Fatalf("New(%v) = %v, want nil", policy, err)
	}
	defer r.other.Close()
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
	if st := h.Stats(); st.Used != 0 || st.Live != 0 || st.FreeBlocks != 0 {
		t.Fatalf("Stats() after freeing everything = %+v, want no blocks, all merged into the top", st)
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

// blockSize is the block a request of n bytes needs.
func blockSize(n int) int { return max((n+8+15)&^15, fit.MinBlock) }

// lastEnd returns where the last block ends: the start of the top.
func (r *runner) lastEnd() int64 {
	st := r.h.Stats()
	return 8 + st.Used + st.FreeBytes
}

// alloc allocates, checks the block against the model and fills it.
func (r *runner) alloc(size, align int) {
	t := r.t
	end := r.lastEnd()
	b, err := r.h.Alloc(size, align)
	if err != nil {
		// Only a request the top cannot hold may fail.
		need := int64(blockSize(size))
		if align > fit.Granule {
			need += int64(align) + fit.Granule
		}
		if b != nil || !errors.Is(err, fit.ErrExhausted) || end+need <= r.limit {
			t.Fatalf("Alloc(%d, %d) = %#x, %v; want a block, or nil and %v with the top at %d, the limit %d",
				size, align, addr(b), err, fit.ErrExhausted, end, r.limit)
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
	if err != nil || usable < blockSize(len(b))-8 || usable >= blockSize(len(b))-8+fit.MinBlock {
		t.Fatalf("%s(%d): UsableSize = %d, %v, want %d to %d", op, len(b), usable, err, blockSize(len(b))-8, blockSize(len(b))-8+fit.MinBlock-1)
	}
	whole := at(b, -8, usable+8) // header and payload
	lo, hi := r.h.Bounds()
	if a-8 < lo || a+uintptr(usable) > hi || !r.h.Committed(whole) {
		t.Fatalf("%s(%d) = [%#x, %#x), want inside committed memory of [%#x, %#x)", op, len(b), a-8, a+uintptr(usable), lo, hi)
	}
	pos, found := slices.BinarySearch(r.addrs, a)
	if found || pos > 0 && r.addrs[pos-1]+uintptr(r.live[r.addrs[pos-1]].usable) > a-8 ||
		pos < len(r.addrs) && a+uintptr(usable) > r.addrs[pos]-8 {
		t.Fatalf("%s(%d) = [%#x, %#x), which overlaps a live block", op, len(b), a-8, a+uintptr(usable))
	}
	r.addrs = slices.Insert(r.addrs, pos, a)
	fill(b, r.nextID)
	r.live[a] = &modelBlock{b: b, usable: usable, id: r.nextID}
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

func (r *runner) free(a uintptr) {
	m := r.drop(a, len(r.live[a].b))
	if err := r.h.Free(m.b); err != nil {
		r.t.Fatalf("Free(%#x) = %v, want nil", a, err)
	}
	if len(r.freed) == 16 {
		r.freed = r.freed[1:]
	}
	r.freed = append(r.freed, a)
}

func (r *runner) realloc(a uintptr, size int) {
	t := r.t
	m := r.live[a]
	end := r.lastEnd()
	b, err := r.h.Realloc(m.b, size)
	if err != nil {
		// Only a block that must grow at the top or move there may fail:
		// either way the top falls short of the new size.
		if b != nil || !errors.Is(err, fit.ErrExhausted) || end+int64(blockSize(size)) <= r.limit {
			t.Fatalf("Realloc(%#x, %d) = %#x, %v; want a block, or nil and %v with the top at %d, the limit %d",
				a, size, addr(b), err, fit.ErrExhausted, end, r.limit)
		}
		if i := intact(m.b, m.id); i >= 0 {
			t.Fatalf("block %#x lost byte %d in a failed Realloc", a, i)
		}
		return
	}
	if len(b) != size || cap(b) != size || b == nil || addr(b)%fit.Granule != 0 {
		t.Fatalf("Realloc(%#x, %d) = %#x len %d cap %d, want len == cap == %d, aligned to %d", a, size, addr(b), len(b), cap(b), size, fit.Granule)
	}
	keep := min(len(m.b), size)
	r.drop(a, 0)
	if i := intact(b[:keep], m.id); i >= 0 {
		t.Fatalf("Realloc(%#x, %d) = %#x: byte %d = %#x, want %#x kept", a, size, addr(b), i, b[i], pattern(m.id, i))
	}
	if addr(b) != a {
		if len(r.freed) == 16 {
			r.freed = r.freed[1:]
		}
		r.freed = append(r.freed, a)
	}
	r.add(b, "Realloc")
}

// probe hands Free, Realloc and UsableSize what they must refuse, and
// checks that they refuse it with the right error and change nothing.
func (r *runner) probe(v int) {
	t := r.t
	var b []byte
	want := fit.ErrForeign
	var some *modelBlock
	if len(r.addrs) > 0 {
		some = r.live[r.addrs[v%len(r.addrs)]]
	}
	switch v % 8 {
	case 0:
		b = nil
	case 1:
		b = make([]byte, 32)
	case 2: // inside a live block
		if some == nil {
			return
		}
		b = at(some.b, 16, 8)
	case 3:
		if some == nil {
			return
		}
		b = at(some.b, 1+v%15, 8)
	case 4: // a freed block: a double free unless its place is taken
		if len(r.freed) == 0 {
			return
		}
		a := r.freed[v%len(r.freed)]
		if _, ok := r.live[a]; ok {
			return // handed out again: freeing it would be legal
		}
		want = fit.ErrDoubleFree
		pos, _ := slices.BinarySearch(r.addrs, a)
		if pos > 0 && a < r.addrs[pos-1]+uintptr(r.live[r.addrs[pos-1]].usable) {
			want = fit.ErrForeign // inside the block in use that took its place
		}
		lo, _ := r.h.Bounds()
		b = r.h.At(int(a-lo), 8)
	case 5: // the top
		lo, hi := r.h.Bounds()
		if lo+uintptr(r.h.TopOffset()) >= hi {
			return
		}
		want = fit.ErrDoubleFree
		b = r.h.At(r.h.TopOffset(), 8)
	case 6:
		if some == nil {
			return
		}
		if u, err := r.h.UsableSize(some.b); u != some.usable || err != nil {
			t.Fatalf("UsableSize(%#x) = %d, %v, want %d, nil", addr(some.b), u, err, some.usable)
		}
		return
	case 7:
		o, err := r.other.Alloc(v, 1)
		if err != nil {
			return
		}
		b = o
	}
	before := r.h.Stats()
	if err := r.h.Free(b); !errors.Is(err, want) {
		t.Fatalf("Free(%#x) (probe %d) = %v, want %v", addr(b), v%8, err, want)
	}
	if got, err := r.h.Realloc(b, v); got != nil || !errors.Is(err, want) {
		t.Fatalf("Realloc(%#x, %d) (probe %d) = %#x, %v, want nil, %v", addr(b), v, v%8, addr(got), err, want)
	}
	if n, err := r.h.UsableSize(b); n != 0 || !errors.Is(err, want) {
		t.Fatalf("UsableSize(%#x) (probe %d) = %d, %v, want 0, %v", addr(b), v%8, n, err, want)
	}
	if after := r.h.Stats(); after != before {
		t.Fatalf("Stats() after refused calls (probe %d) = %+v, want unchanged %+v", v%8, after, before)
	}
}

// trim gives the top back and checks that nothing else moved.
func (r *runner) trim() {
	t := r.t
	before := r.h.Stats()
	n, err := r.h.Trim()
	if err != nil {
		t.Fatalf("Trim() = %v, want nil", err)
	}
	after := r.h.Stats()
	if after.Footprint != before.Footprint-n || after.Used != before.Used || after.FreeBytes != before.FreeBytes || after.Top > before.Top {
		t.Fatalf("Trim() = %d: Stats() went from %+v to %+v, want only the top to shrink", n, before, after)
	}
	r.verifyAll()
}

// verify checks the heap's invariants and counts against the model.
func (r *runner) verify(step string) {
	t := r.t
	t.Helper()
	if err := r.h.Check(); err != nil {
		t.Fatalf("Check() after %s = %v, want nil", step, err)
	}
	st := checkStats(t, r.h)
	if st.Live != r.bytes || st.Blocks != int64(len(r.live)) {
		t.Fatalf("Stats() after %s = Live %d, Blocks %d, want %d, %d", step, st.Live, st.Blocks, r.bytes, len(r.live))
	}
	if st.Footprint > r.limit {
		t.Fatalf("Stats().Footprint after %s = %d, over the limit %d", step, st.Footprint, r.limit)
	}
}

// verifyAll checks every live block's bytes as well: all of them in
// blocks up to 4 KiB, the first and the last KiB of larger ones, so that an
// input cannot spend minutes rereading a full heap (Free and Realloc check
// every byte of the blocks they take).
func (r *runner) verifyAll() {
	for _, a := range r.addrs {
		m := r.live[a]
		if !r.h.Committed(m.b) {
			r.t.Fatalf("live block %#x is no longer committed", a)
		}
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
}
