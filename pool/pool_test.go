package pool_test

import (
	"errors"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/internal/invariants"
	"github.com/carvelab/carve/mem"
	"github.com/carvelab/carve/pool"
)

// Helpers shared by the package's tests.

// isAny reports whether err wraps one of targets.
func isAny(err error, targets []error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// checkStats verifies the equations every pool's statistics obey.
func checkStats(t testing.TB, p *pool.Pool) pool.Stats {
	t.Helper()
	st := p.Stats()
	if st.Live != st.InUse*int64(st.ChunkSize) {
		t.Fatalf("Stats().Live = %d, want InUse %d * ChunkSize %d", st.Live, st.InUse, st.ChunkSize)
	}
	if st.Used != st.InUse*int64(st.Stride) {
		t.Fatalf("Stats().Used = %d, want InUse %d * Stride %d", st.Used, st.InUse, st.Stride)
	}
	if st.Used-st.Live != st.InUse*int64(st.Stride-st.ChunkSize) {
		t.Fatalf("Stats() Used - Live = %d, want InUse * (Stride - ChunkSize) = %d", st.Used-st.Live, st.InUse*int64(st.Stride-st.ChunkSize))
	}
	if st.InUse+st.Free+st.Quarantined != st.Carved || st.Carved > st.Capacity {
		t.Fatalf("Stats() = InUse %d + Free %d + Quarantined %d, Carved %d, Capacity %d: want InUse + Free + Quarantined = Carved <= Capacity",
			st.InUse, st.Free, st.Quarantined, st.Carved, st.Capacity)
	}
	if st.Live > st.Used || st.Used > st.Footprint || st.Resident > st.Footprint {
		t.Fatalf("Stats() = Live %d, Used %d, Footprint %d, Resident %d: want Live <= Used <= Footprint, Resident <= Footprint",
			st.Live, st.Used, st.Footprint, st.Resident)
	}
	return st
}

func TestNew(t *testing.T) {
	page := mem.PageSize()
	tests := []struct {
		name    string
		chunk   int
		opts    []pool.Option
		wantErr error
		// huge reservations are address space on Linux, but Go memory
		// with the fallback of other platforms.
		huge bool
		// For a pool made: its geometry.
		stride, align, slab int
	}{
		{name: "link size", chunk: pool.LinkSize, stride: 8, align: 8, slab: 64 << 10},
		{name: "default", chunk: 64, stride: 64, align: 8, slab: 64 << 10},
		{name: "rounded to align", chunk: 100, stride: 104, align: 8, slab: 64 << 10},
		{name: "below link size", chunk: pool.LinkSize - 1, wantErr: pool.ErrChunkSize},
		{name: "zero", chunk: 0, wantErr: pool.ErrChunkSize},
		{name: "negative", chunk: -1, wantErr: pool.ErrChunkSize},
		{name: "1 GiB", chunk: 1 << 30, opts: []pool.Option{pool.Limit(8 << 30)}, huge: true, stride: 1 << 30, align: 8, slab: 8 << 30},
		{name: "over 1 GiB", chunk: 1<<30 + 1, opts: []pool.Option{pool.Limit(16 << 30)}, wantErr: pool.ErrChunkSize},
		{name: "align 1 gives the link's 8", chunk: 9, opts: []pool.Option{pool.Align(1)}, stride: 16, align: 8, slab: 64 << 10},
		{name: "align 4 gives the link's 8", chunk: 12, opts: []pool.Option{pool.Align(4)}, stride: 16, align: 8, slab: 64 << 10},
		{name: "align 16", chunk: 24, opts: []pool.Option{pool.Align(16)}, stride: 32, align: 16, slab: 64 << 10},
		{name: "align page", chunk: 100, opts: []pool.Option{pool.Align(page)}, stride: page, align: page, slab: 64 << 10},
		{name: "align 0", chunk: 64, opts: []pool.Option{pool.Align(0)}, wantErr: pool.ErrAlign},
		{name: "align negative", chunk: 64, opts: []pool.Option{pool.Align(-8)}, wantErr: pool.ErrAlign},
		{name: "align 3", chunk: 64, opts: []pool.Option{pool.Align(3)}, wantErr: pool.ErrAlign},
		{name: "align 24", chunk: 64, opts: []pool.Option{pool.Align(24)}, wantErr: pool.ErrAlign},
		{name: "align over page", chunk: 64, opts: []pool.Option{pool.Align(2 * page)}, wantErr: pool.ErrAlign},
		{name: "slab page", chunk: 64, opts: []pool.Option{pool.SlabSize(page)}, stride: 64, align: 8, slab: page},
		{name: "slab raised to 8 chunks", chunk: 16 << 10, opts: []pool.Option{pool.SlabSize(page)}, stride: 16 << 10, align: 8, slab: 128 << 10},
		{name: "slab 0", chunk: 64, opts: []pool.Option{pool.SlabSize(0)}, wantErr: pool.ErrOption},
		{name: "slab negative", chunk: 64, opts: []pool.Option{pool.SlabSize(-page)}, wantErr: pool.ErrOption},
		{name: "slab below page", chunk: 64, opts: []pool.Option{pool.SlabSize(page / 2)}, wantErr: pool.ErrOption},
		{name: "slab not a power of two", chunk: 64, opts: []pool.Option{pool.SlabSize(3 * page)}, wantErr: pool.ErrOption},
		{name: "slab over 1 GiB", chunk: 64, opts: []pool.Option{pool.SlabSize(2 << 30)}, wantErr: pool.ErrOption},
		{name: "limit one slab", chunk: 64, opts: []pool.Option{pool.Limit(64 << 10)}, stride: 64, align: 8, slab: 64 << 10},
		{name: "limit 1 TiB", chunk: 64, opts: []pool.Option{pool.Limit(1 << 40)}, huge: true, stride: 64, align: 8, slab: 64 << 10},
		{name: "limit 0", chunk: 64, opts: []pool.Option{pool.Limit(0)}, wantErr: pool.ErrOption},
		{name: "limit negative", chunk: 64, opts: []pool.Option{pool.Limit(-1)}, wantErr: pool.ErrOption},
		{name: "limit below a slab", chunk: 64, opts: []pool.Option{pool.Limit(32 << 10)}, wantErr: pool.ErrOption},
		{name: "limit below the raised slab", chunk: 16 << 10, opts: []pool.Option{pool.Limit(64 << 10)}, wantErr: pool.ErrOption},
		{name: "limit over 1 TiB", chunk: 64, opts: []pool.Option{pool.Limit(1<<40 + 1)}, wantErr: pool.ErrOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.huge && runtime.GOOS != "linux" {
				t.Skip("reserves more than a Go heap slice should hold")
			}
			p, err := pool.New(tt.chunk, tt.opts...)
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
			want := pool.Stats{ChunkSize: tt.chunk, Stride: tt.stride, Align: tt.align, SlabSize: tt.slab}
			if st != want {
				t.Errorf("Stats() = %+v, want %+v (nothing committed before the first Alloc)", st, want)
			}
			if p.ChunkSize() != tt.chunk || p.Stride() != tt.stride {
				t.Errorf("ChunkSize(), Stride() = %d, %d, want %d, %d", p.ChunkSize(), p.Stride(), tt.chunk, tt.stride)
			}
		})
	}
}

func TestOver(t *testing.T) {
	tests := []struct {
		name    string
		region  []byte
		chunk   int
		opts    []pool.Option
		wantErr error
		// For a pool made: the chunks it holds.
		capacity int64
	}{
		{name: "four chunks", region: make([]byte, 4*64), chunk: 64, capacity: 4},
		{name: "tail unused", region: make([]byte, 4*64+63), chunk: 64, capacity: 4},
		{name: "one chunk", region: make([]byte, 64), chunk: 64, capacity: 1},
		{name: "misaligned start", region: make([]byte, 4*64)[3:], chunk: 64, capacity: 3},
		{name: "misaligned start, align 64", region: make([]byte, 64*64+64)[3:], chunk: 64, opts: []pool.Option{pool.Align(64)}},
		{name: "stride 16", region: make([]byte, 160), chunk: 9, capacity: 10},
		{name: "slab size and limit ignored", region: make([]byte, 4*64), chunk: 64, opts: []pool.Option{pool.SlabSize(3), pool.Limit(-1)}, capacity: 4},
		{name: "nil region", region: nil, chunk: 64, wantErr: pool.ErrChunkSize},
		{name: "empty region", region: []byte{}, chunk: 64, wantErr: pool.ErrChunkSize},
		{name: "region smaller than a chunk", region: make([]byte, 63), chunk: 64, wantErr: pool.ErrChunkSize},
		{name: "padding leaves no chunk", region: make([]byte, 64)[1:15], chunk: 8, wantErr: pool.ErrChunkSize},
		{name: "chunk below link size", region: make([]byte, 64), chunk: pool.LinkSize - 1, wantErr: pool.ErrChunkSize},
		{name: "chunk over 1 GiB", region: make([]byte, 64), chunk: 1<<30 + 1, wantErr: pool.ErrChunkSize},
		{name: "align 0", region: make([]byte, 64), chunk: 8, opts: []pool.Option{pool.Align(0)}, wantErr: pool.ErrAlign},
		{name: "align 12", region: make([]byte, 64), chunk: 8, opts: []pool.Option{pool.Align(12)}, wantErr: pool.ErrAlign},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := pool.Over(tt.region, tt.chunk, tt.opts...)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Over(%d bytes, %d) = %v, want %v", len(tt.region), tt.chunk, err, tt.wantErr)
			}
			if err != nil {
				if p != nil {
					t.Errorf("Over(%d bytes, %d) = %p, %v, want a nil pool with the error", len(tt.region), tt.chunk, p, err)
				}
				return
			}
			defer p.Close()
			heaptest.MustCheck(t, p, "Over")
			st := checkStats(t, p)
			if tt.capacity == 0 { // depends on where the region starts
				pad := -heaptest.Addr(tt.region) & uintptr(st.Align-1)
				tt.capacity = int64((uintptr(len(tt.region)) - pad) / uintptr(st.Stride))
			}
			if st.Capacity != tt.capacity || st.Slabs != 1 || st.Footprint != int64(len(tt.region)) || st.Carved != 0 {
				t.Errorf("Stats() = Capacity %d, Slabs %d, Footprint %d, Carved %d, want %d, 1, %d, 0",
					st.Capacity, st.Slabs, st.Footprint, st.Carved, tt.capacity, len(tt.region))
			}
			// Every chunk it holds is handed out, then it is exhausted.
			for i := range tt.capacity {
				c := heaptest.MustAlloc(t, p)
				lo, hi := heaptest.Addr(tt.region), heaptest.Addr(tt.region)+uintptr(len(tt.region))
				if a := heaptest.Addr(c); a < lo || a+uintptr(len(c)) > hi || a%uintptr(st.Align) != 0 {
					t.Fatalf("Alloc() #%d = [%#x, %#x), want inside [%#x, %#x) aligned to %d", i, a, a+uintptr(len(c)), lo, hi, st.Align)
				}
			}
			if c, err := p.Alloc(); c != nil || !errors.Is(err, pool.ErrExhausted) {
				t.Errorf("Alloc() #%d = %p, %v, want nil, %v", tt.capacity, unsafe.SliceData(c), err, pool.ErrExhausted)
			}
		})
	}
}

// TestStride checks that a chunk size that is not a multiple of the
// alignment is rounded up to the stride, and that the rounding shows in
// Stats as Used - Live.
func TestStride(t *testing.T) {
	tests := []struct {
		name         string
		chunk, align int
		stride       int
	}{
		{"8 align 8", 8, 8, 8},
		{"9 align 8", 9, 8, 16},
		{"24 align 16", 24, 16, 32},
		{"40 align 16", 40, 16, 48},
		{"48 align 64", 48, 64, 64},
		{"100 align 1", 100, 1, 104},
		{"100 align 2", 100, 2, 104},
		{"1000 align 256", 1000, 256, 1024},
		{"1024 align 64", 1024, 64, 1024},
	}
	const n = 5
	for _, tt := range tests {
		for _, kind := range []string{"New", "Over"} {
			t.Run(tt.name+"/"+kind, func(t *testing.T) {
				var p *pool.Pool
				if kind == "New" {
					p = heaptest.MustNew(t, pool.New, tt.chunk, pool.Align(tt.align))
				} else {
					p = heaptest.MustOver(t, pool.Over, make([]byte, (n+1)*tt.stride+tt.align)[1:], tt.chunk, pool.Align(tt.align))
				}
				var prev []byte
				for i := range n {
					c := heaptest.MustAlloc(t, p)
					if prev != nil && heaptest.Addr(c)-heaptest.Addr(prev) != uintptr(tt.stride) {
						t.Errorf("Alloc() #%d at %#x, %d bytes after the previous, want the stride %d", i, heaptest.Addr(c), heaptest.Addr(c)-heaptest.Addr(prev), tt.stride)
					}
					prev = c
				}
				st := checkStats(t, p)
				if st.Stride != tt.stride || p.Stride() != tt.stride {
					t.Errorf("Stats().Stride, Stride() = %d, %d, want %d", st.Stride, p.Stride(), tt.stride)
				}
				if got, want := st.Used-st.Live, int64(n*(tt.stride-tt.chunk)); got != want {
					t.Errorf("Stats() Used - Live = %d, want %d", got, want)
				}
			})
		}
	}
}

// TestExhausted checks that a pool at its limit says so with an error
// wrapping ErrExhausted, never a nil chunk alone, and keeps working.
func TestExhausted(t *testing.T) {
	tests := []struct {
		name     string
		make     func(t *testing.T) *pool.Pool
		capacity int
		slabs    int
	}{
		{"Over four chunks", func(t *testing.T) *pool.Pool { return heaptest.MustOver(t, pool.Over, make([]byte, 4*64), 64) }, 4, 1},
		{"New at its limit", func(t *testing.T) *pool.Pool {
			return heaptest.MustNew(t, pool.New, 1024, pool.SlabSize(64<<10), pool.Limit(128<<10))
		}, 128, 2},
		{"New one slab of big chunks", func(t *testing.T) *pool.Pool {
			return heaptest.MustNew(t, pool.New, 8<<10, pool.SlabSize(mem.PageSize()), pool.Limit(64<<10))
		}, 8, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.make(t)
			var cs [][]byte
			for range tt.capacity {
				cs = append(cs, heaptest.MustAlloc(t, p))
			}
			for i := range 3 {
				c, err := p.Alloc()
				if c != nil || !errors.Is(err, pool.ErrExhausted) {
					t.Fatalf("Alloc() past the limit, try %d = %p, %v, want nil, %v", i, unsafe.SliceData(c), err, pool.ErrExhausted)
				}
				heaptest.MustCheck(t, p, "Alloc past the limit")
			}
			st := checkStats(t, p)
			if st.InUse != int64(tt.capacity) || st.Free != 0 || st.Slabs != tt.slabs || st.Capacity != int64(tt.capacity) {
				t.Errorf("Stats() = InUse %d, Free %d, Slabs %d, Capacity %d, want %d, 0, %d, %d",
					st.InUse, st.Free, st.Slabs, st.Capacity, tt.capacity, tt.slabs, tt.capacity)
			}
			// Free one, allocate one: the freed chunk comes back.
			victim := cs[tt.capacity/2]
			heaptest.MustFree(t, p, victim)
			if c := heaptest.MustAlloc(t, p); heaptest.Addr(c) != heaptest.Addr(victim) {
				t.Errorf("Alloc() after Free(%#x) = %#x, want the freed chunk", heaptest.Addr(victim), heaptest.Addr(c))
			}
			if _, err := p.Alloc(); !errors.Is(err, pool.ErrExhausted) {
				t.Errorf("Alloc() = %v, want %v", err, pool.ErrExhausted)
			}
			heaptest.MustCheck(t, p, "Alloc past the limit")
		})
	}
}

// TestLimitIsMost checks that a pool made by New never commits more than
// its Limit, also when the limit is not a whole number of slabs.
func TestLimitIsMost(t *testing.T) {
	const limit = 100_000 // one whole 64 KiB slab and a part of another
	p := heaptest.MustNew(t, pool.New, 1024, pool.SlabSize(64<<10), pool.Limit(limit))
	for i := 0; ; i++ {
		if _, err := p.Alloc(); err != nil {
			if !errors.Is(err, pool.ErrExhausted) {
				t.Fatalf("Alloc() #%d = %v, want nil or %v", i, err, pool.ErrExhausted)
			}
			break
		}
		if i > limit/1024 {
			t.Fatalf("Alloc() #%d succeeded: more chunks of 1024 bytes than a limit of %d bytes holds", i, limit)
		}
	}
	heaptest.MustCheck(t, p, "exhaustion")
	if st := checkStats(t, p); st.Footprint > limit {
		t.Errorf("Stats().Footprint = %d at exhaustion, want at most Limit(%d)", st.Footprint, limit)
	}
}

// TestLIFO checks that the free list lives in the chunks: a freed chunk is
// the next one handed out.
func TestLIFO(t *testing.T) {
	for _, kind := range []string{"New", "Over"} {
		t.Run(kind, func(t *testing.T) {
			var p *pool.Pool
			if kind == "New" {
				p = heaptest.MustNew(t, pool.New, 64)
			} else {
				p = heaptest.MustOver(t, pool.Over, make([]byte, 8*64), 64)
			}
			a := heaptest.MustAlloc(t, p)
			heaptest.MustAlloc(t, p) // stays in use
			c := heaptest.MustAlloc(t, p)
			heaptest.MustFree(t, p, a)
			heaptest.MustFree(t, p, c)
			steps := []struct {
				name string
				want uintptr
			}{
				{"last freed", heaptest.Addr(c)},
				{"first freed", heaptest.Addr(a)},
				{"fresh", heaptest.Addr(c) + 64},
			}
			for _, s := range steps {
				if got := heaptest.MustAlloc(t, p); heaptest.Addr(got) != s.want {
					t.Errorf("Alloc() = %#x, want %#x (%s)", heaptest.Addr(got), s.want, s.name)
				}
			}
			if st := checkStats(t, p); st.InUse != 4 || st.Free != 0 || st.Carved != 4 {
				t.Errorf("Stats() = InUse %d, Free %d, Carved %d, want 4, 0, 4", st.InUse, st.Free, st.Carved)
			}
		})
	}
}

// TestAppendStaysInChunk checks that cap == len: append must copy rather
// than write into the next chunk.
func TestAppendStaysInChunk(t *testing.T) {
	p := heaptest.MustNew(t, pool.New, 64)
	a, b := heaptest.MustAlloc(t, p), heaptest.MustAlloc(t, p)
	if heaptest.Addr(b) != heaptest.Addr(a)+64 {
		t.Fatalf("Alloc() = %#x, %#x, want adjacent chunks", heaptest.Addr(a), heaptest.Addr(b))
	}
	heaptest.Fill(a, 1)
	heaptest.Fill(b, 2)
	grown := append(a, 0xee)
	if i := heaptest.Intact(b, 2); i >= 0 {
		t.Fatalf("append to the chunk at %#x wrote byte %d of the next chunk", heaptest.Addr(a), i)
	}
	if heaptest.Addr(grown) == heaptest.Addr(a) {
		t.Errorf("append(chunk, x) = %#x, want a copy elsewhere", heaptest.Addr(grown))
	}
	heaptest.MustCheck(t, p, "append")
}

// TestFreeAnyLength checks that Free goes by where the slice starts.
func TestFreeAnyLength(t *testing.T) {
	p := heaptest.MustNew(t, pool.New, 64)
	tests := []struct {
		name string
		cut  func(c []byte) []byte
	}{
		{"whole", func(c []byte) []byte { return c }},
		{"first byte", func(c []byte) []byte { return c[:1] }},
		{"empty", func(c []byte) []byte { return c[:0] }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := heaptest.MustAlloc(t, p)
			heaptest.MustFree(t, p, tt.cut(c))
			if st := checkStats(t, p); st.InUse != 0 {
				t.Errorf("Stats().InUse = %d, want 0", st.InUse)
			}
		})
	}
}

// TestAlignment checks that every chunk is aligned, lies inside the pool's
// memory and overlaps no other, for pools made by New and by Over over a
// region that starts misaligned.
func TestAlignment(t *testing.T) {
	for _, size := range []int{8, 24, 40, 48, 64, 1024} {
		for _, align := range []int{8, 16, 64} {
			for _, kind := range []string{"New", "Over"} {
				t.Run(kind+"/"+itoa(size)+"/"+itoa(align), func(t *testing.T) {
					var p *pool.Pool
					var region []byte
					n := 300
					if kind == "New" {
						p = heaptest.MustNew(t, pool.New, size, pool.Align(align), pool.SlabSize(mem.PageSize()))
					} else {
						region = make([]byte, 64<<10+3)[3:]
						p = heaptest.MustOver(t, pool.Over, region, size, pool.Align(align))
						n = int(p.Stats().Capacity)
					}
					lo, hi := p.Bounds()
					if region != nil && (lo != heaptest.Addr(region) || hi != heaptest.Addr(region)+uintptr(len(region))) {
						t.Fatalf("Bounds() = [%#x, %#x), want the region [%#x, %#x)", lo, hi, heaptest.Addr(region), heaptest.Addr(region)+uintptr(len(region)))
					}
					var addrs []uintptr
					for i := range n {
						c := heaptest.MustAlloc(t, p)
						a := heaptest.Addr(c)
						if a%uintptr(align) != 0 {
							t.Fatalf("Alloc() #%d = %#x, want aligned to %d", i, a, align)
						}
						if a < lo || a+uintptr(size) > hi || !p.Committed(c) {
							t.Fatalf("Alloc() #%d = [%#x, %#x), want inside committed memory of [%#x, %#x)", i, a, a+uintptr(size), lo, hi)
						}
						addrs = append(addrs, a)
					}
					if kind == "Over" {
						if _, err := p.Alloc(); !errors.Is(err, pool.ErrExhausted) {
							t.Fatalf("Alloc() #%d = %v, want %v", n, err, pool.ErrExhausted)
						}
					}
					slices.Sort(addrs)
					for i := 1; i < len(addrs); i++ {
						if addrs[i] < addrs[i-1]+uintptr(size) {
							t.Fatalf("chunks at %#x and %#x overlap (chunk size %d)", addrs[i-1], addrs[i], size)
						}
					}
					checkStats(t, p)
				})
			}
		}
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// TestFreeForeign checks that Free refuses memory the pool did not hand
// out, with an error wrapping ErrForeign, and changes nothing.
func TestFreeForeign(t *testing.T) {
	const size, slab = 1000, 64 << 10 // 65 chunks a slab, a 536-byte tail
	p := heaptest.MustNew(t, pool.New, size, pool.SlabSize(slab))
	other := heaptest.MustNew(t, pool.New, size, pool.SlabSize(slab))
	var cs [][]byte
	for range 70 { // slab 0 full, 5 chunks carved from slab 1
		cs = append(cs, heaptest.MustAlloc(t, p))
	}
	first, last := cs[0], cs[len(cs)-1]
	if heaptest.Addr(last) != heaptest.Addr(first)+slab+4*size {
		t.Fatalf("Alloc() #69 = %#x, want the fifth chunk of the second slab, %#x", heaptest.Addr(last), heaptest.Addr(first)+slab+4*size)
	}
	heaptest.MustFree(t, p, cs[3])
	heaptest.MustFree(t, p, cs[7])
	otherChunk := heaptest.MustAlloc(t, other)
	region := make([]byte, 4*size+500)
	over := heaptest.MustOver(t, pool.Over, region[3:], size)
	var ocs [][]byte
	for range 4 {
		ocs = append(ocs, heaptest.MustAlloc(t, over))
	}
	ofirst := ocs[0]
	pad := int(heaptest.Addr(ofirst) - heaptest.Addr(region))

	tests := []struct {
		name  string
		pool  *pool.Pool
		slice func() []byte
	}{
		{"nil", p, func() []byte { return nil }},
		{"empty Go slice", p, func() []byte { return []byte{} }},
		{"Go heap", p, func() []byte { return make([]byte, size) }},
		{"interior", p, func() []byte { return cs[10][1:] }},
		{"interior at the stride", p, func() []byte { return cs[10][8:] }},
		{"last byte", p, func() []byte { return cs[10][size-1:] }},
		{"chunk of another pool", p, func() []byte { return otherChunk }},
		{"uncarved chunk at the cursor", p, func() []byte { return heaptest.At(last, size, size) }},
		{"uncarved chunk beyond the cursor", p, func() []byte { return heaptest.At(last, 10*size, size) }},
		{"tail of a full slab", p, func() []byte { return heaptest.At(first, 65*size, 8) }},
		{"uncommitted slab", p, func() []byte { return heaptest.At(first, 2*slab, size) }},
		{"last slab of the reservation", p, func() []byte { return heaptest.At(first, (1<<30)-slab, size) }},
		{"before the pool", p, func() []byte { return heaptest.At(first, -size, size) }},
		{"Over: tail of the region", over, func() []byte { return region[pad+4*size:] }},
		{"Over: padding before the first chunk", over, func() []byte { return region[pad-3:] }},
		{"Over: region start", over, func() []byte { return region }},
		{"Over: interior", over, func() []byte { return ocs[1][size/2:] }},
		{"Over: chunk of the New pool", over, func() []byte { return cs[20] }},
		{"Over: Go heap", over, func() []byte { return make([]byte, size) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.slice()
			before := tt.pool.Stats()
			err := tt.pool.Free(b)
			if !errors.Is(err, pool.ErrForeign) {
				t.Fatalf("Free(%#x) = %v, want %v", heaptest.Addr(b), err, pool.ErrForeign)
			}
			if errors.Is(err, pool.ErrClosed) || errors.Is(err, pool.ErrDoubleFree) {
				t.Errorf("Free(%#x) = %v, want only %v", heaptest.Addr(b), err, pool.ErrForeign)
			}
			if err.Error() == "" {
				t.Errorf("Free(%#x) = an error with no message", heaptest.Addr(b))
			}
			heaptest.MustCheck(t, tt.pool, "Free of a foreign slice")
			if after := tt.pool.Stats(); after != before {
				t.Errorf("Stats() after Free(%#x) = %+v, want unchanged %+v", heaptest.Addr(b), after, before)
			}
		})
	}
	// The free list is as it was: the last freed chunk, then the one before.
	for _, want := range [][]byte{cs[7], cs[3]} {
		if c := heaptest.MustAlloc(t, p); heaptest.Addr(c) != heaptest.Addr(want) {
			t.Errorf("Alloc() = %#x, want %#x", heaptest.Addr(c), heaptest.Addr(want))
		}
	}
}

// TestForeignErrorKept checks that an error keeps its meaning: closing the
// pool later must not turn an ErrForeign already returned into ErrClosed.
func TestForeignErrorKept(t *testing.T) {
	p, err := pool.New(64)
	if err != nil {
		t.Fatalf("New(64) = %v, want nil", err)
	}
	ferr := p.Free(make([]byte, 64))
	if !errors.Is(ferr, pool.ErrForeign) {
		t.Fatalf("Free(Go slice) = %v, want %v", ferr, pool.ErrForeign)
	}
	msg := ferr.Error()
	if err := p.Close(); err != nil {
		t.Fatalf("Close() = %v, want nil", err)
	}
	if !errors.Is(ferr, pool.ErrForeign) || ferr.Error() != msg {
		t.Errorf("Free's error after Close = %q (Is ErrForeign %t), want unchanged %q", ferr, errors.Is(ferr, pool.ErrForeign), msg)
	}
}

func TestClose(t *testing.T) {
	tests := []struct {
		name string
		make func(t *testing.T) *pool.Pool
	}{
		{"New", func(t *testing.T) *pool.Pool { return heaptest.MustNew(t, pool.New, 64) }},
		{"New never used", func(t *testing.T) *pool.Pool { return heaptest.MustNew(t, pool.New, 64) }},
		{"Over", func(t *testing.T) *pool.Pool { return heaptest.MustOver(t, pool.Over, make([]byte, 4*64), 64) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.make(t)
			var c []byte
			if tt.name != "New never used" {
				c = heaptest.MustAlloc(t, p)
				heaptest.MustFree(t, p, heaptest.MustAlloc(t, p))
			}
			if err := p.Close(); err != nil {
				t.Fatalf("Close() = %v, want nil", err)
			}
			heaptest.MustCheck(t, p, "Close")
			if got, err := p.Alloc(); got != nil || !errors.Is(err, pool.ErrClosed) {
				t.Errorf("Alloc() after Close = %p, %v, want nil, %v", unsafe.SliceData(got), err, pool.ErrClosed)
			}
			for _, b := range [][]byte{c, nil, make([]byte, 64)} {
				if err := p.Free(b); !errors.Is(err, pool.ErrClosed) {
					t.Errorf("Free(%#x) after Close = %v, want %v", heaptest.Addr(b), err, pool.ErrClosed)
				}
			}
			if err := p.Close(); !errors.Is(err, pool.ErrClosed) {
				t.Errorf("Close() again = %v, want %v", err, pool.ErrClosed)
			}
			if n, err := p.Trim(); n != 0 || !errors.Is(err, pool.ErrClosed) {
				t.Errorf("Trim() after Close = %d, %v, want 0, %v", n, err, pool.ErrClosed)
			}
			if c != nil && p.Owns(c) {
				t.Errorf("Owns(%#x) after Close = true, want false", heaptest.Addr(c))
			}
			if n := p.Footprint(); n != 0 {
				t.Errorf("Footprint() after Close = %d, want 0", n)
			}
			p.Slabs(func(s, carved int) bool {
				t.Errorf("Slabs() after Close yielded slab %d (%d carved), want none", s, carved)
				return true
			})
			if st := checkStats(t, p); st.Footprint != 0 || st.Resident != 0 || st.InUse != 0 || st.Slabs != 0 || st.Carved != 0 {
				t.Errorf("Stats() after Close = %+v, want nothing committed, carved or in use", st)
			}
			heaptest.MustCheck(t, p, "Close")
		})
	}
}

// TestGrow checks that a pool made by New grows one slab at a time up to
// its limit, and that the counts follow.
func TestGrow(t *testing.T) {
	const slab, perSlab, slabs = 64 << 10, 64, 4
	p := heaptest.MustNew(t, pool.New, 1024, pool.SlabSize(slab), pool.Limit(slabs*slab))
	var cs [][]byte
	for i := range slabs * perSlab {
		cs = append(cs, heaptest.MustAlloc(t, p))
		st := checkStats(t, p)
		want := i/perSlab + 1
		if st.Slabs != want || st.Footprint != int64(want*slab) || st.Capacity != int64(want*perSlab) ||
			st.Carved != int64(i+1) || st.InUse != int64(i+1) || st.Free != 0 || st.SlabSize != slab {
			t.Fatalf("Stats() after %d Allocs = %+v, want Slabs %d, Footprint %d, Capacity %d, Carved %d, InUse %d, Free 0",
				i+1, st, want, want*slab, want*perSlab, i+1, i+1)
		}
	}
	if _, err := p.Alloc(); !errors.Is(err, pool.ErrExhausted) {
		t.Fatalf("Alloc() #%d = %v, want %v", slabs*perSlab, err, pool.ErrExhausted)
	}
	for i, c := range cs {
		heaptest.MustFree(t, p, c)
		st := checkStats(t, p)
		if st.Slabs != slabs || st.Footprint != slabs*slab || st.Free != int64(i+1) || st.Carved != slabs*perSlab {
			t.Fatalf("Stats() after %d Frees = %+v, want Slabs %d, Footprint %d, Free %d, Carved %d (no Trim)",
				i+1, st, slabs, slabs*slab, i+1, slabs*perSlab)
		}
	}
}

// TestTrimOver checks that a pool over the caller's region gives nothing
// back.
func TestTrimOver(t *testing.T) {
	p := heaptest.MustOver(t, pool.Over, make([]byte, 4*64), 64)
	heaptest.MustFree(t, p, heaptest.MustAlloc(t, p))
	before := p.Stats()
	if n, err := p.Trim(); n != 0 || err != nil {
		t.Errorf("Trim() = %d, %v, want 0, nil", n, err)
	}
	heaptest.MustCheck(t, p, "Trim")
	if after := p.Stats(); after != before {
		t.Errorf("Stats() after Trim = %+v, want unchanged %+v", after, before)
	}
}

// TestTrimNothingFree checks that Trim keeps every slab that holds a chunk
// in use, and that a pool that never allocated has nothing to give back.
func TestTrimNothingFree(t *testing.T) {
	p := heaptest.MustNew(t, pool.New, 1024)
	if n, err := p.Trim(); n != 0 || err != nil {
		t.Errorf("Trim() of a new pool = %d, %v, want 0, nil", n, err)
	}
	heaptest.MustCheck(t, p, "Trim")
	var cs [][]byte
	for i := range 200 { // four slabs, the last partly carved
		c := heaptest.MustAlloc(t, p)
		heaptest.Fill(c, i)
		cs = append(cs, c)
	}
	for i := 0; i < len(cs); i += 2 {
		heaptest.MustFree(t, p, cs[i])
	}
	before := p.Stats()
	if n, err := p.Trim(); n != 0 || err != nil {
		t.Errorf("Trim() with a chunk in use in every slab = %d, %v, want 0, nil", n, err)
	}
	heaptest.MustCheck(t, p, "Trim")
	if after := p.Stats(); after.Slabs != before.Slabs || after.Footprint != before.Footprint || after.Free != before.Free {
		t.Errorf("Stats() after Trim = %+v, want unchanged %+v", after, before)
	}
	for i := 1; i < len(cs); i += 2 {
		if j := heaptest.Intact(cs[i], i); j >= 0 {
			t.Fatalf("chunk %d lost byte %d in Trim", i, j)
		}
	}
}

// TestNilOption checks that a nil Option is an error wrapping ErrOption
// for every constructor, not a panic.
func TestNilOption(t *testing.T) {
	good := pool.SlabSize(64 << 10)
	for _, opts := range [][]pool.Option{{nil}, {good, nil}, {nil, good}} {
		if p, err := pool.New(64, opts...); p != nil || !errors.Is(err, pool.ErrOption) {
			t.Errorf("New(64, %d options, one nil) = %v, %v, want nil, %v", len(opts), p, err, pool.ErrOption)
		}
		if p, err := pool.Over(make([]byte, 4096), 64, opts...); p != nil || !errors.Is(err, pool.ErrOption) {
			t.Errorf("Over(4096 bytes, 64, %d options, one nil) = %v, %v, want nil, %v", len(opts), p, err, pool.ErrOption)
		}
		if o, err := pool.NewOf[[64]byte](opts...); o != nil || !errors.Is(err, pool.ErrOption) {
			t.Errorf("NewOf[[64]byte](%d options, one nil) = %v, %v, want nil, %v", len(opts), o, err, pool.ErrOption)
		}
	}
}

// TestMetadata checks that Stats.Metadata, the Go memory of the pool's
// tables, is there once the pool holds memory, grows as the pool grows
// (at least a byte per slab, and in checked builds two bits per chunk),
// and goes when Trim gives every slab back.
func TestMetadata(t *testing.T) {
	const chunk, slab = 64, 4096
	p := heaptest.MustNew(t, pool.New, chunk, pool.SlabSize(slab))
	if st := p.Stats(); st.Metadata != 0 {
		t.Errorf("Stats().Metadata of a pool that holds nothing = %d, want 0", st.Metadata)
	}
	var cs [][]byte
	last := int64(0)
	for _, slabs := range []int{1, 10, 100, 1000} {
		for len(cs) < slabs*slab/chunk {
			cs = append(cs, mustAllocQuiet(t, p))
		}
		st := checkStats(t, p)
		least := int64(st.Slabs)
		if invariants.Enabled {
			least += st.Carved / 64 * 8 // the live bitmap
		}
		if st.Metadata < least || st.Metadata <= last || st.Metadata > 4*least+1024 {
			t.Errorf("%d slabs: Stats().Metadata = %d, want above %d (the last) and in [%d, %d]", slabs, st.Metadata, last, least, 4*least+1024)
		}
		last = st.Metadata
	}
	for _, c := range cs {
		mustFreeQuiet(t, p, c)
	}
	if _, err := p.Trim(); err != nil {
		t.Fatalf("Trim() = %v, want nil", err)
	}
	heaptest.MustCheck(t, p, "Trim")
	if st := p.Stats(); st.Metadata != 0 || st.Slabs != 0 {
		t.Errorf("Stats() after Trim gave every slab back = Metadata %d, Slabs %d, want 0, 0", st.Metadata, st.Slabs)
	}
	o := heaptest.MustOver(t, pool.Over, make([]byte, 4*chunk), chunk)
	heaptest.MustAlloc(t, o)
	if st := o.Stats(); st.Metadata <= 0 {
		t.Errorf("Stats().Metadata of a pool over a region = %d, want its slab table's byte", st.Metadata)
	}
}

// mustAllocQuiet allocates without checking the whole pool, for tests
// that allocate many chunks.
func mustAllocQuiet(t testing.TB, p *pool.Pool) []byte {
	t.Helper()
	c, err := p.Alloc()
	if err != nil {
		t.Fatalf("Alloc() = %v, want nil", err)
	}
	return c
}

// mustFreeQuiet frees without checking the whole pool.
func mustFreeQuiet(t testing.TB, p *pool.Pool, c []byte) {
	t.Helper()
	if err := p.Free(c); err != nil {
		t.Fatalf("Free(%#x) = %v, want nil", heaptest.Addr(c), err)
	}
}

// TestCountBits checks the checker's count of set bits in [lo, hi)
// against a bit-by-bit count.
func TestCountBits(t *testing.T) {
	m := []uint64{0xf0f0_0000_0000_0001, 0, ^uint64(0), 0x8000_0000_0000_0003}
	for lo := uintptr(0); lo <= 256; lo += 7 {
		for hi := lo; hi <= 300; hi += 5 {
			var want int64
			for i := lo; i < min(hi, 256); i++ {
				if m[i/64]&(1<<(i%64)) != 0 {
					want++
				}
			}
			if got := pool.CountBits(m, lo, hi); got != want {
				t.Fatalf("CountBits(m, %d, %d) = %d, want %d", lo, hi, got, want)
			}
		}
	}
}
