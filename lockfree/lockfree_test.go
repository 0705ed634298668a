package lockfree_test

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"unsafe"

	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/internal/invariants"
	"github.com/carvelab/carve/lockfree"
	"github.com/carvelab/carve/mem"
)

// Helpers shared by the package's tests.

func itoa(i int) string { return strconv.Itoa(i) }

// checkStats verifies the equations every pool's statistics obey.
func checkStats(t testing.TB, p *lockfree.Pool) lockfree.Stats {
	t.Helper()
	st := p.Stats()
	if st.Live != st.InUse*int64(st.ChunkSize) || st.Used != st.InUse*int64(st.Stride) {
		t.Fatalf("Stats() = Live %d, Used %d, want InUse %d * ChunkSize %d, * Stride %d", st.Live, st.Used, st.InUse, st.ChunkSize, st.Stride)
	}
	if st.InUse < 0 || st.InUse+st.Free+st.Cached+st.Quarantined != st.Carved || st.Carved > st.Capacity {
		t.Fatalf("Stats() = InUse %d + Free %d + Cached %d + Quarantined %d, Carved %d, Capacity %d: want InUse + Free + Cached + Quarantined = Carved <= Capacity",
			st.InUse, st.Free, st.Cached, st.Quarantined, st.Carved, st.Capacity)
	}
	if st.Live > st.Used || st.Used > st.Footprint || st.Resident > st.Footprint {
		t.Fatalf("Stats() = Live %d, Used %d, Footprint %d, Resident %d: want Live <= Used <= Footprint, Resident <= Footprint",
			st.Live, st.Used, st.Footprint, st.Resident)
	}
	if st.Capacity*int64(st.Stride) > st.Footprint-st.LinkBytes || st.LinkBytes < st.Capacity*lockfree.LinkBytes {
		t.Fatalf("Stats() = Capacity %d * Stride %d, Footprint %d, LinkBytes %d: want the chunks and their links inside the footprint",
			st.Capacity, st.Stride, st.Footprint, st.LinkBytes)
	}
	return st
}

func TestNew(t *testing.T) {
	page := mem.PageSize()
	tests := []struct {
		name    string
		chunk   int
		opts    []lockfree.Option
		wantErr error
		// huge reservations are address space on Linux, but Go memory
		// with the fallback of other platforms.
		huge bool
		// For a pool made: its geometry.
		stride, align, slab int
	}{
		{name: "one byte", chunk: 1, stride: 8, align: 8, slab: 64 << 10},
		{name: "default", chunk: 64, stride: 64, align: 8, slab: 64 << 10},
		{name: "rounded to align", chunk: 100, stride: 104, align: 8, slab: 64 << 10},
		{name: "zero", chunk: 0, wantErr: lockfree.ErrChunkSize},
		{name: "negative", chunk: -1, wantErr: lockfree.ErrChunkSize},
		{name: "1 GiB", chunk: 1 << 30, opts: []lockfree.Option{lockfree.Limit(8 << 30)}, huge: true, stride: 1 << 30, align: 8, slab: 8 << 30},
		{name: "over 1 GiB", chunk: 1<<30 + 1, opts: []lockfree.Option{lockfree.Limit(16 << 30)}, wantErr: lockfree.ErrChunkSize},
		{name: "align 1 packs", chunk: 9, opts: []lockfree.Option{lockfree.Align(1)}, stride: 9, align: 1, slab: 64 << 10},
		{name: "align 4", chunk: 6, opts: []lockfree.Option{lockfree.Align(4)}, stride: 8, align: 4, slab: 64 << 10},
		{name: "align 16", chunk: 24, opts: []lockfree.Option{lockfree.Align(16)}, stride: 32, align: 16, slab: 64 << 10},
		{name: "align page", chunk: 100, opts: []lockfree.Option{lockfree.Align(page)}, stride: page, align: page, slab: 64 << 10},
		{name: "align 0", chunk: 64, opts: []lockfree.Option{lockfree.Align(0)}, wantErr: lockfree.ErrAlign},
		{name: "align negative", chunk: 64, opts: []lockfree.Option{lockfree.Align(-8)}, wantErr: lockfree.ErrAlign},
		{name: "align 3", chunk: 64, opts: []lockfree.Option{lockfree.Align(3)}, wantErr: lockfree.ErrAlign},
		{name: "align over page", chunk: 64, opts: []lockfree.Option{lockfree.Align(2 * page)}, wantErr: lockfree.ErrAlign},
		{name: "slab page", chunk: 64, opts: []lockfree.Option{lockfree.SlabSize(page)}, stride: 64, align: 8, slab: page},
		{name: "slab raised to 8 chunks", chunk: 16 << 10, opts: []lockfree.Option{lockfree.SlabSize(page)}, stride: 16 << 10, align: 8, slab: 128 << 10},
		{name: "slab 0", chunk: 64, opts: []lockfree.Option{lockfree.SlabSize(0)}, wantErr: lockfree.ErrOption},
		{name: "slab below page", chunk: 64, opts: []lockfree.Option{lockfree.SlabSize(page / 2)}, wantErr: lockfree.ErrOption},
		{name: "slab not a power of two", chunk: 64, opts: []lockfree.Option{lockfree.SlabSize(3 * page)}, wantErr: lockfree.ErrOption},
		{name: "slab over 1 GiB", chunk: 64, opts: []lockfree.Option{lockfree.SlabSize(2 << 30)}, wantErr: lockfree.ErrOption},
		{name: "limit one slab", chunk: 64, opts: []lockfree.Option{lockfree.Limit(64 << 10)}, stride: 64, align: 8, slab: 64 << 10},
		{name: "limit 256 GiB of 64-byte chunks", chunk: 64, opts: []lockfree.Option{lockfree.Limit(64 * (1<<32 - 64))}, huge: true, stride: 64, align: 8, slab: 64 << 10},
		{name: "limit over MaxChunks", chunk: 64, opts: []lockfree.Option{lockfree.Limit(64 << 32)}, wantErr: lockfree.ErrOption},
		{name: "limit 0", chunk: 64, opts: []lockfree.Option{lockfree.Limit(0)}, wantErr: lockfree.ErrOption},
		{name: "limit negative", chunk: 64, opts: []lockfree.Option{lockfree.Limit(-1)}, wantErr: lockfree.ErrOption},
		{name: "limit below a slab", chunk: 64, opts: []lockfree.Option{lockfree.Limit(32 << 10)}, wantErr: lockfree.ErrOption},
		{name: "limit over 1 TiB", chunk: 1 << 20, opts: []lockfree.Option{lockfree.Limit(1<<40 + 1)}, wantErr: lockfree.ErrOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.huge && runtime.GOOS != "linux" {
				t.Skip("reserves more than a Go heap slice should hold")
			}
			p, err := lockfree.New(tt.chunk, tt.opts...)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("New(%d) = %v, want %v", tt.chunk, err, tt.wantErr)
			}
			if err != nil {
				if p != nil {
					t.Errorf("New(%d) = %p, %v, want a nil pool with the error", tt.chunk, p, err)
				}
				return
			}
			defer p.Close()
			heaptest.MustCheck(t, p, "New")
			st := checkStats(t, p)
			want := lockfree.Stats{ChunkSize: tt.chunk, Stride: tt.stride, Align: tt.align, SlabSize: tt.slab}
			if st != want {
				t.Fatalf("Stats() of a new pool = %+v, want %+v", st, want)
			}
			c := heaptest.MustAlloc(t, p)
			if a := heaptest.Addr(c); a%uintptr(tt.align) != 0 {
				t.Errorf("Alloc() = %#x, want aligned to %d", a, tt.align)
			}
			if tt.chunk <= 1<<20 {
				heaptest.Fill(c, 7)
				if i := heaptest.Intact(c, 7); i >= 0 {
					t.Fatalf("chunk lost byte %d", i)
				}
			}
			st = checkStats(t, p)
			if st.Slabs != 1 || st.Footprint != int64(tt.slab)+st.LinkBytes || st.Capacity != int64(tt.slab/tt.stride) || st.InUse != 1 {
				t.Errorf("Stats() after one Alloc = %+v, want one slab of %d bytes holding %d chunks, one in use", st, tt.slab, tt.slab/tt.stride)
			}
			if tt.chunk <= 1<<20 { // checked builds poison what is freed: spare the machine a GiB
				heaptest.MustFree(t, p, c)
			}
		})
	}
}

func TestOver(t *testing.T) {
	tests := []struct {
		name    string
		len     int
		offset  int // where the region starts in its Go slice
		chunk   int
		opts    []lockfree.Option
		wantErr error
		chunks  int // the pool's capacity
	}{
		{name: "four chunks", len: 4 * 64, chunk: 64, chunks: 4},
		{name: "tail unused", len: 4*64 + 63, chunk: 64, chunks: 4},
		{name: "misaligned start", len: 4 * 64, offset: 3, chunk: 64, chunks: 3},
		{name: "align 1 uses every byte", len: 100, offset: 3, chunk: 10, opts: []lockfree.Option{lockfree.Align(1)}, chunks: 10},
		{name: "one chunk", len: 64, chunk: 64, chunks: 1},
		{name: "too small", len: 63, chunk: 64, wantErr: lockfree.ErrChunkSize},
		{name: "too small once aligned", len: 64, offset: 1, chunk: 64, wantErr: lockfree.ErrChunkSize},
		{name: "empty", len: 0, chunk: 8, wantErr: lockfree.ErrChunkSize},
		{name: "zero chunk", len: 64, chunk: 0, wantErr: lockfree.ErrChunkSize},
		{name: "bad align", len: 64, chunk: 8, opts: []lockfree.Option{lockfree.Align(12)}, wantErr: lockfree.ErrAlign},
		{name: "slab and limit ignored", len: 128, chunk: 8, opts: []lockfree.Option{lockfree.SlabSize(3), lockfree.Limit(-1)}, chunks: 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			buf := make([]uint64, (tt.offset+tt.len)/8+1) // 8-aligned
			region := unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), len(buf)*8)[tt.offset : tt.offset+tt.len]
			p, err := lockfree.Over(region, tt.chunk, tt.opts...)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Over(%d bytes at +%d, %d) = %v, want %v", tt.len, tt.offset, tt.chunk, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			defer p.Close()
			var got [][]byte
			for {
				c, err := p.Alloc()
				if err != nil {
					if !errors.Is(err, lockfree.ErrExhausted) || c != nil {
						t.Fatalf("Alloc() = %v, %v, want nil, %v", c, err, lockfree.ErrExhausted)
					}
					break
				}
				if heaptest.Addr(c) < heaptest.Addr(region) || heaptest.Addr(c)+uintptr(len(c)) > heaptest.Addr(region)+uintptr(len(region)) {
					t.Fatalf("Alloc() = %#x, outside the region [%#x, +%d)", heaptest.Addr(c), heaptest.Addr(region), len(region))
				}
				got = append(got, c)
				heaptest.MustCheck(t, p, "Alloc")
			}
			if len(got) != tt.chunks {
				t.Fatalf("Over(%d bytes at +%d, %d) handed out %d chunks, want %d", tt.len, tt.offset, tt.chunk, len(got), tt.chunks)
			}
			st := checkStats(t, p)
			if st.Capacity != int64(tt.chunks) || st.InUse != int64(tt.chunks) || st.Footprint != int64(tt.len)+st.LinkBytes || st.Slabs != 1 {
				t.Errorf("Stats() = %+v, want Capacity = InUse = %d, Footprint %d + links, 1 slab", st, tt.chunks, tt.len)
			}
			for _, c := range got {
				heaptest.MustFree(t, p, c)
			}
			if st := checkStats(t, p); st.InUse != 0 || st.Free != int64(tt.chunks) {
				t.Errorf("Stats() after freeing all = InUse %d, Free %d, want 0, %d", st.InUse, st.Free, tt.chunks)
			}
		})
	}
}

// TestLIFO: the chunk freed last is the next one handed out, as in package
// pool, and chunks come carved in address order.
func TestLIFO(t *testing.T) {
	p := heaptest.MustOver(t, lockfree.Over, make([]byte, 8*64), 64)
	var cs [8][]byte
	for i := range cs {
		cs[i] = heaptest.MustAlloc(t, p)
		if i > 0 && heaptest.Addr(cs[i]) != heaptest.Addr(cs[i-1])+64 {
			t.Fatalf("Alloc() #%d = %#x, want the next chunk %#x", i, heaptest.Addr(cs[i]), heaptest.Addr(cs[i-1])+64)
		}
	}
	for _, i := range []int{2, 5, 0} {
		heaptest.MustFree(t, p, cs[i])
	}
	for _, i := range []int{0, 5, 2} {
		if c := heaptest.MustAlloc(t, p); heaptest.Addr(c) != heaptest.Addr(cs[i]) {
			t.Fatalf("Alloc() = %#x, want chunk %d at %#x, freed last", heaptest.Addr(c), i, heaptest.Addr(cs[i]))
		}
	}
}

// TestForeign frees what the pool did not hand out: each is refused with
// ErrForeign and the pool is unchanged.
func TestForeign(t *testing.T) {
	for _, kind := range []string{"New", "Over"} {
		t.Run(kind, func(t *testing.T) {
			var p *lockfree.Pool
			var region []byte
			if kind == "New" {
				p = heaptest.MustNew(t, lockfree.New, 48, lockfree.SlabSize(4096))
			} else {
				// The region starts inside its Go object, so that addresses
				// below it stay in the object (checkptr, which -race turns
				// on, insists).
				region = make([]byte, 48+40*48+20)[48:]
				p = heaptest.MustOver(t, lockfree.Over, region, 48)
			}
			other := heaptest.MustOver(t, lockfree.Over, make([]byte, 4*48), 48)
			var cs [][]byte
			for range 10 {
				cs = append(cs, heaptest.MustAlloc(t, p))
			}
			heaptest.MustFree(t, p, cs[9])
			oc := heaptest.MustAlloc(t, other)
			probes := []struct {
				name string
				b    []byte
			}{
				{"nil", nil},
				{"Go slice", make([]byte, 48)},
				{"interior", cs[3][1:]},
				{"last byte", cs[3][47:]},
				{"padding after the chunk", heaptest.At(cs[3], 48, 1)}, // stride 48: the next chunk
				{"below the base", heaptest.At(cs[0], -48, 48)},
				{"uncarved", heaptest.At(cs[0], 48*20, 48)},
				{"other pool", oc},
			}
			for _, pr := range probes {
				before := p.Stats()
				err := p.Free(pr.b)
				want := lockfree.ErrForeign
				if pr.name == "padding after the chunk" {
					// cs[3]+48 is chunk 4: a real chunk; use it to check
					// Owns and skip the Free.
					if !p.Owns(pr.b) {
						t.Errorf("Owns(chunk 4) = false, want true")
					}
					continue
				}
				if !errors.Is(err, want) {
					t.Errorf("Free(%s) = %v, want %v", pr.name, err, want)
				}
				if p.Owns(pr.b) {
					t.Errorf("Owns(%s) = true, want false", pr.name)
				}
				if after := p.Stats(); after != before {
					t.Errorf("Stats() after Free(%s) = %+v, want unchanged %+v", pr.name, after, before)
				}
				heaptest.MustCheck(t, p, "Free("+pr.name+")")
			}
		})
	}
}

// TestIndexOf checks the multiply-and-rotate test that Free relies on
// against division, for strides odd and even, over offsets at and around
// chunk boundaries and at random.
func TestIndexOf(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	strides := []uint64{1, 2, 3, 7, 8, 24, 48, 100, 104, 4096, 12288, 1<<30 - 8, 1 << 30}
	for range 40 {
		strides = append(strides, 1+r.Uint64N(1<<30))
	}
	for _, d := range strides {
		shift := 0
		for d>>shift&1 == 0 {
			shift++
		}
		inv := lockfree.Inverse(d >> shift)
		if (d>>shift)*inv != 1 {
			t.Fatalf("Inverse(%d) = %d: product %d, want 1", d>>shift, inv, (d>>shift)*inv)
		}
		for range 2000 {
			var off uint64
			switch r.IntN(4) {
			case 0:
				off = r.Uint64N(1<<32) * d
			case 1:
				off = r.Uint64N(1<<32)*d + 1 + r.Uint64N(d)
			case 2:
				off = r.Uint64()
			default:
				off = -r.Uint64N(1 << 20) // below the base
			}
			q := lockfree.Divide(off, inv, shift)
			ok := q < 1<<32
			if want := off%d == 0 && off/d < 1<<32; ok != want || ok && q != off/d {
				t.Fatalf("stride %d, offset %d: rotate gives %d (ok %t), want %d (ok %t)", d, off, q, ok, off/d, want)
			}
		}
	}
}

func TestHeadWord(t *testing.T) {
	tests := []struct {
		i, v    uint32
		next    uint32
		wantNxt uint64
	}{
		{0, 0, 5, 1<<32 | 5},
		{7, 41, 1<<32 - 1, 42<<32 | (1<<32 - 1)},
		{1<<32 - 1, 1<<32 - 1, 3, 3}, // the version wraps to 0
	}
	for _, tt := range tests {
		h := lockfree.Pack(tt.i, tt.v)
		if i, v := lockfree.Unpack(h); i != tt.i || v != tt.v {
			t.Errorf("Unpack(Pack(%d, %d)) = %d, %d", tt.i, tt.v, i, v)
		}
		if got := lockfree.Next(h, tt.next); got != tt.wantNxt {
			t.Errorf("Next(Pack(%d, %d), %d) = %#x, want %#x", tt.i, tt.v, tt.next, got, tt.wantNxt)
		}
	}
}

// TestVersion: every change to the free list moves the head's version.
func TestVersion(t *testing.T) {
	p := heaptest.MustOver(t, lockfree.Over, make([]byte, 4*64), 64)
	_, v0 := p.Head()
	a := heaptest.MustAlloc(t, p) // carved: the list does not change
	b := heaptest.MustAlloc(t, p)
	if _, v := p.Head(); v != v0 {
		t.Fatalf("version after carving = %d, want %d", v, v0)
	}
	heaptest.MustFree(t, p, a)
	heaptest.MustFree(t, p, b)
	heaptest.MustAlloc(t, p)
	if i, v := p.Head(); v != v0+3 || i != 0 {
		t.Fatalf("Head() after two pushes and a pop = %d, version %d, want chunk 0, version %d", i, v, v0+3)
	}
}

// TestGrowth fills a pool made by New to its limit, slab by slab.
func TestGrowth(t *testing.T) {
	page := mem.PageSize()
	const chunk = 200 // straddles slab boundaries
	p := heaptest.MustNew(t, lockfree.New, chunk, lockfree.SlabSize(page), lockfree.Limit(int64(4*page)))
	stride := 200
	want := 4 * page / stride
	var cs [][]byte
	for {
		c, err := p.Alloc()
		if err != nil {
			if !errors.Is(err, lockfree.ErrExhausted) {
				t.Fatalf("Alloc() = %v, want %v", err, lockfree.ErrExhausted)
			}
			break
		}
		heaptest.Fill(c, len(cs))
		cs = append(cs, c)
		st := checkStats(t, p)
		slabs := (len(cs)*stride + page - 1) / page
		if st.Slabs != slabs || st.Capacity != int64(slabs*page/stride) {
			t.Fatalf("after %d Allocs: Stats() = Slabs %d, Capacity %d, want %d, %d", len(cs), st.Slabs, st.Capacity, slabs, slabs*page/stride)
		}
		heaptest.MustCheck(t, p, "Alloc")
	}
	if len(cs) != want {
		t.Fatalf("pool of 4 pages handed out %d chunks of %d, want %d", len(cs), stride, want)
	}
	for id, c := range cs {
		if i := heaptest.Intact(c, id); i >= 0 {
			t.Fatalf("chunk %d lost byte %d", id, i)
		}
		heaptest.MustFree(t, p, c)
	}
	st := checkStats(t, p)
	if st.InUse != 0 || st.Free != int64(want) || st.Footprint != int64(4*page)+st.LinkBytes {
		t.Errorf("Stats() after freeing all = %+v, want 0 in use, %d free, footprint 4 pages + links", st, want)
	}
}

func TestClose(t *testing.T) {
	for _, kind := range []string{"New", "Over"} {
		t.Run(kind, func(t *testing.T) {
			var p *lockfree.Pool
			var err error
			if kind == "New" {
				p, err = lockfree.New(64)
			} else {
				p, err = lockfree.Over(make([]byte, 1024), 64)
			}
			if err != nil {
				t.Fatal(err)
			}
			c := heaptest.MustAlloc(t, p)
			cache := p.NewCache()
			if _, err := cache.Alloc(); err != nil {
				t.Fatal(err)
			}
			if err := p.Close(); err != nil {
				t.Fatalf("Close() = %v, want nil", err)
			}
			if err := p.Close(); !errors.Is(err, lockfree.ErrClosed) {
				t.Errorf("Close() again = %v, want %v", err, lockfree.ErrClosed)
			}
			if b, err := p.Alloc(); b != nil || !errors.Is(err, lockfree.ErrClosed) {
				t.Errorf("Alloc() after Close = %v, want %v", err, lockfree.ErrClosed)
			}
			if err := p.Free(c); !errors.Is(err, lockfree.ErrClosed) {
				t.Errorf("Free() after Close = %v, want %v", err, lockfree.ErrClosed)
			}
			if st := p.Stats(); st.InUse != 0 || st.Footprint != 0 || st.ChunkSize != 64 {
				t.Errorf("Stats() after Close = %+v, want geometry only", st)
			}
			if p.Owns(c) {
				t.Errorf("Owns(%#x) after Close = true, want false", heaptest.Addr(c))
			}
			late := p.NewCache()
			if b, err := late.Alloc(); b != nil || !errors.Is(err, lockfree.ErrClosed) {
				t.Errorf("Alloc() of a cache made after Close = %v, want %v", err, lockfree.ErrClosed)
			}
			if err := late.Free(c); !errors.Is(err, lockfree.ErrClosed) {
				t.Errorf("Free() into a cache made after Close = %v, want %v", err, lockfree.ErrClosed)
			}
			if err := late.Flush(); !errors.Is(err, lockfree.ErrClosed) {
				t.Errorf("Flush() of a cache made after Close = %v, want %v", err, lockfree.ErrClosed)
			}
			heaptest.MustCheck(t, p, "Close")
		})
	}
}

// TestCheckedBuild reports which build the tests ran in, for the logs.
func TestCheckedBuild(t *testing.T) {
	t.Logf("invariants.Enabled = %t", invariants.Enabled)
}

// TestNilOption checks that a nil Option is an error wrapping ErrOption
// for every constructor, not a panic.
func TestNilOption(t *testing.T) {
	good := lockfree.SlabSize(64 << 10)
	for _, opts := range [][]lockfree.Option{{nil}, {good, nil}, {nil, good}} {
		if p, err := lockfree.New(64, opts...); p != nil || !errors.Is(err, lockfree.ErrOption) {
			t.Errorf("New(64, %d options, one nil) = %v, %v, want nil, %v", len(opts), p, err, lockfree.ErrOption)
		}
		if p, err := lockfree.Over(make([]byte, 4096), 64, opts...); p != nil || !errors.Is(err, lockfree.ErrOption) {
			t.Errorf("Over(4096 bytes, 64, %d options, one nil) = %v, %v, want nil, %v", len(opts), p, err, lockfree.ErrOption)
		}
		if o, err := lockfree.NewOf[[64]byte](opts...); o != nil || !errors.Is(err, lockfree.ErrOption) {
			t.Errorf("NewOf[[64]byte](%d options, one nil) = %v, %v, want nil, %v", len(opts), o, err, lockfree.ErrOption)
		}
	}
}
