package buddy_test

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"testing"

	carve "github.com/carvelab/carve"
	"github.com/carvelab/carve/buddy"
	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/mem"
)

// Helpers shared by the package's tests.

var modes = []buddy.Mode{buddy.Plain, buddy.Header}

// isAny reports whether err wraps one of targets.
func isAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// mustCheck fails the test when the heap's invariants do not hold.
func mustCheck(t testing.TB, h *buddy.Heap, step string) {
	t.Helper()
	if err := h.Check(); err != nil {
		t.Fatalf("Check() after %s = %v, want nil\nlayout %s", step, err, h.Layout())
	}
}

// mustNew returns a heap, closed when the test ends.
func mustNew(t testing.TB, mode buddy.Mode, opts ...buddy.Option) *buddy.Heap {
	t.Helper()
	h, err := buddy.New(mode, opts...)
	if err != nil {
		t.Fatalf("New(%v) = %v, want nil", mode, err)
	}
	t.Cleanup(func() { h.Close() })
	mustCheck(t, h, "New")
	return h
}

// mustAlloc allocates and checks the result and the heap.
func mustAlloc(t testing.TB, h *buddy.Heap, size, align int) []byte {
	t.Helper()
	b, err := h.Alloc(size, align)
	if err != nil {
		t.Fatalf("Alloc(%d, %d) = %v, want nil (stats %+v)", size, align, err, h.Stats().Stats)
	}
	if b == nil || len(b) != size || cap(b) != size || heaptest.Addr(b)%uintptr(align) != 0 {
		t.Fatalf("Alloc(%d, %d) = %#x (nil %t), len %d, cap %d, want aligned, len == cap == size", size, align, heaptest.Addr(b), b == nil, len(b), cap(b))
	}
	mustCheck(t, h, fmt.Sprintf("Alloc(%d, %d)", size, align))
	return b
}

func mustFree(t testing.TB, h *buddy.Heap, b []byte) {
	t.Helper()
	if err := h.Free(b); err != nil {
		t.Fatalf("Free(%#x) = %v, want nil", heaptest.Addr(b), err)
	}
	mustCheck(t, h, fmt.Sprintf("Free(%#x)", heaptest.Addr(b)))
}

// blockOf returns the block size a request takes, by the rules Alloc
// documents.
func blockOf(mode buddy.Mode, size, align, minBlock int) int {
	need := max(size, align)
	if mode == buddy.Header {
		need = max(buddy.HeaderSize, align) + max(size, 1)
	}
	return max(minBlock, 1<<bits.Len(uint(need-1)))
}

// checkStats verifies the equations every heap's statistics obey, and
// returns them.
func checkStats(t testing.TB, h *buddy.Heap) buddy.Stats {
	t.Helper()
	s := h.Stats()
	var blocks, free, used int64
	for k := range s.LiveByOrder {
		blocks += s.LiveByOrder[k]
		free += s.FreeByOrder[k]
		used += s.LiveByOrder[k] << k
	}
	switch {
	case blocks != s.Blocks || free != s.FreeBlocks:
		t.Fatalf("Stats() = Blocks %d, FreeBlocks %d, want the per-order sums %d, %d", s.Blocks, s.FreeBlocks, blocks, free)
	case used != s.Used:
		t.Fatalf("Stats().Used = %d, want the sum of the blocks in use, %d", s.Used, used)
	case s.Live < 0 || s.Live > s.Used-s.HeaderBytes || s.Used > s.Footprint || s.Resident > s.Footprint:
		t.Fatalf("Stats() = Live %d, Used %d, HeaderBytes %d, Footprint %d, Resident %d: want 0 <= Live <= Used - HeaderBytes, Used <= Footprint, Resident <= Footprint",
			s.Live, s.Used, s.HeaderBytes, s.Footprint, s.Resident)
	case s.Mode == buddy.Plain && s.HeaderBytes != 0, s.Mode == buddy.Header && s.HeaderBytes < buddy.HeaderSize*s.Blocks:
		t.Fatalf("Stats() = HeaderBytes %d for %d blocks in %v mode", s.HeaderBytes, s.Blocks, s.Mode)
	case s.Footprint%int64(s.Granule) != 0 || s.Idle%int64(s.Granule) != 0 || s.Idle > s.Footprint-s.Used:
		t.Fatalf("Stats() = Footprint %d, Idle %d, Used %d, want Footprint and Idle whole granules of %d, Idle <= Footprint - Used",
			s.Footprint, s.Idle, s.Used, s.Granule)
	}
	return s
}

func TestModeNames(t *testing.T) {
	for _, tt := range []struct {
		mode buddy.Mode
		name string
	}{{buddy.Plain, "buddy"}, {buddy.Header, "buddy-header"}} {
		if got := tt.mode.String(); got != tt.name {
			t.Errorf("%d.String() = %q, want %q", int(tt.mode), got, tt.name)
		}
		if m, err := buddy.ParseMode(tt.name); m != tt.mode || err != nil {
			t.Errorf("ParseMode(%q) = %v, %v, want %v, nil", tt.name, m, err, tt.mode)
		}
	}
	if got := buddy.Mode(7).String(); got != "buddy.Mode(7)" {
		t.Errorf("Mode(7).String() = %q, want %q", got, "buddy.Mode(7)")
	}
	if _, err := buddy.ParseMode("binary-buddy"); !errors.Is(err, buddy.ErrOption) {
		t.Errorf("ParseMode(%q) = %v, want %v", "binary-buddy", err, buddy.ErrOption)
	}
}

func TestNew(t *testing.T) {
	ps := mem.PageSize()
	tests := []struct {
		name    string
		mode    buddy.Mode
		opts    []buddy.Option
		wantErr error
		// For a heap made: its geometry and its roots.
		span             int64
		minB, maxB, gran int
		layout           string
	}{
		{name: "defaults", span: 1 << 30, minB: 16, maxB: 1 << 30, gran: max(64<<10, ps), layout: "1073741824F"},
		{name: "header defaults", mode: buddy.Header, span: 1 << 30, minB: 16, maxB: 1 << 30, gran: max(64<<10, ps), layout: "1073741824F"},
		{name: "limit not a power of two", opts: []buddy.Option{buddy.Limit(100 << 20)}, span: 100 << 20, minB: 16, maxB: 64 << 20,
			gran: max(64<<10, ps), layout: "67108864F 33554432F 4194304F"},
		{name: "limit rounded down to MinBlock", opts: []buddy.Option{buddy.Limit(3000)}, span: 2992, minB: 16, maxB: 2048,
			gran: ps, layout: "2048F 512F 256F 128F 32F 16F"},
		{name: "max block below the limit", opts: []buddy.Option{buddy.Limit(5000), buddy.MaxBlock(1024), buddy.MinBlock(64)},
			span: 4992, minB: 64, maxB: 1024, gran: max(ps, 8192), layout: "1024F 1024F 1024F 1024F 512F 256F 128F"},
		{name: "small heap, page granule", opts: []buddy.Option{buddy.Limit(1024)}, span: 1024, minB: 16, maxB: 1024, gran: ps, layout: "1024F"},
		{name: "granule", opts: []buddy.Option{buddy.Granule(4 * ps)}, span: 1 << 30, minB: 16, maxB: 1 << 30, gran: 4 * ps, layout: "1073741824F"},
		{name: "one block", opts: []buddy.Option{buddy.Limit(16)}, span: 16, minB: 16, maxB: 16, gran: ps, layout: "16F"},
		{name: "bad mode", mode: 2, wantErr: buddy.ErrOption},
		{name: "zero option", opts: []buddy.Option{{}}, wantErr: buddy.ErrOption},
		{name: "limit 0", opts: []buddy.Option{buddy.Limit(0)}, wantErr: buddy.ErrOption},
		{name: "limit negative", opts: []buddy.Option{buddy.Limit(-1)}, wantErr: buddy.ErrOption},
		{name: "limit over 1 TiB", opts: []buddy.Option{buddy.Limit(1<<40 + 1)}, wantErr: buddy.ErrOption},
		{name: "limit below min block", opts: []buddy.Option{buddy.Limit(8)}, wantErr: buddy.ErrOption},
		{name: "min block 8", opts: []buddy.Option{buddy.MinBlock(8)}, wantErr: buddy.ErrOption},
		{name: "min block 24", opts: []buddy.Option{buddy.MinBlock(24)}, wantErr: buddy.ErrOption},
		{name: "max block not a power of two", opts: []buddy.Option{buddy.MaxBlock(100)}, wantErr: buddy.ErrOption},
		{name: "max block over the limit", opts: []buddy.Option{buddy.Limit(1024), buddy.MaxBlock(2048)}, wantErr: buddy.ErrOption},
		{name: "max block below min block", opts: []buddy.Option{buddy.MinBlock(64), buddy.MaxBlock(32)}, wantErr: buddy.ErrOption},
		{name: "granule below a page", opts: []buddy.Option{buddy.Granule(ps / 2)}, wantErr: buddy.ErrOption},
		{name: "granule not a power of two", opts: []buddy.Option{buddy.Granule(3 * ps)}, wantErr: buddy.ErrOption},
		{name: "granule over 1 GiB", opts: []buddy.Option{buddy.Granule(int(min(int64(2<<30), math.MaxInt)))}, wantErr: buddy.ErrOption},
		{name: "retain negative", opts: []buddy.Option{buddy.Retain(-1)}, wantErr: buddy.ErrOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := buddy.New(tt.mode, tt.opts...)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("New(%v) = %v, want %v", tt.mode, err, tt.wantErr)
			}
			if err != nil {
				if h != nil {
					t.Errorf("New(%v) = %p, %v, want a nil heap with the error", tt.mode, h, err)
				}
				return
			}
			defer h.Close()
			mustCheck(t, h, "New")
			s := checkStats(t, h)
			want := buddy.Stats{Mode: tt.mode, Span: tt.span, MinBlock: tt.minB, MaxBlock: tt.maxB, Granule: tt.gran,
				FreeBlocks: int64(len(strings.Fields(tt.layout))), FreeByOrder: s.FreeByOrder}
			want.Metadata = s.Metadata
			if s != want {
				t.Errorf("Stats() = %+v\nwant %+v (nothing committed before the first Alloc)", s, want)
			}
			if got := h.Layout(); got != tt.layout {
				t.Errorf("Layout() = %q, want %q", got, tt.layout)
			}
		})
	}
}

// The scripted tests run a sequence of steps on a small heap and compare
// its layout afterwards, block by block. A step is one of
//
//	a=16        a = Alloc(16, 1)
//	a=16/256    a = Alloc(16, 256)
//	-a          Free(a)
//	a~300       a = Realloc(a, 300)
//	close       Close()
//
// optionally followed by " !err", the error the step must return (err is
// a key of stepErrors). Allocated bytes are filled with a pattern per
// name and verified when freed or reallocated, and at the end.

var stepErrors = map[string]error{
	"size": buddy.ErrSize, "align": buddy.ErrAlign, "exhausted": buddy.ErrExhausted,
	"foreign": buddy.ErrForeign, "double": buddy.ErrDoubleFree, "closed": buddy.ErrClosed,
}

func TestScript(t *testing.T) {
	tests := []struct {
		name   string
		mode   buddy.Mode
		opts   []buddy.Option // after Limit(1024)
		steps  []string
		layout string         // after the steps
		at     map[string]int // payload offsets from the base
	}{
		// Splitting.
		{name: "split down to the smallest block", steps: []string{"a=16"},
			layout: "16L 16F 32F 64F 128F 256F 512F", at: map[string]int{"a": 0}},
		{name: "the buddy goes next", steps: []string{"a=16", "b=16"},
			layout: "16L 16L 32F 64F 128F 256F 512F", at: map[string]int{"a": 0, "b": 16}},
		{name: "lowest free block of the smallest order", steps: []string{"a=64", "b=64", "c=64", "-a", "d=32"},
			layout: "32L 32F 64L 64L 64F 256F 512F", at: map[string]int{"d": 0, "b": 64, "c": 128}},
		{name: "a request of 2^k takes 2^k", steps: []string{"a=64", "b=128"},
			layout: "64L 64F 128L 256F 512F", at: map[string]int{"a": 0, "b": 128}},
		{name: "min block", opts: []buddy.Option{buddy.MinBlock(64)}, steps: []string{"a=1", "b=65"},
			layout: "64L 64F 128L 256F 512F", at: map[string]int{"a": 0, "b": 128}},

		// Merging.
		{name: "merge climbs the orders", steps: []string{"a=16", "b=16", "c=100", "-a", "-b"},
			layout: "128F 128L 256F 512F", at: map[string]int{"c": 128}},
		{name: "merge waits for the buddy", steps: []string{"a=16", "b=16", "-b"},
			layout: "16L 16F 32F 64F 128F 256F 512F"},
		{name: "merge up to the root", steps: []string{"a=16", "b=16", "c=100", "-a", "-c", "-b"}, layout: "1024F"},
		{name: "header: merge up to the root", mode: buddy.Header, steps: []string{"a=48", "b=48", "c=1/64", "-b", "-a", "-c"}, layout: "1024F"},

		// Header mode.
		{name: "header: a request of exactly 2^k takes 2^(k+1)", mode: buddy.Header, steps: []string{"a=64", "b=128"},
			layout: "128L 128F 256L 512F", at: map[string]int{"a": 16, "b": 272}},
		{name: "header: 2^k minus the header fits 2^k", mode: buddy.Header, steps: []string{"a=48"},
			layout: "64L 64F 128F 256F 512F", at: map[string]int{"a": 16}},

		// Alignment.
		{name: "alignment takes a larger order", steps: []string{"a=1", "b=10/256"},
			layout: "16L 16F 32F 64F 128F 256L 512F", at: map[string]int{"a": 0, "b": 256}},
		{name: "alignment 16 costs nothing", steps: []string{"a=1/16", "b=1/16"},
			layout: "16L 16L 32F 64F 128F 256F 512F", at: map[string]int{"a": 0, "b": 16}},
		{name: "header: the payload starts at the alignment", mode: buddy.Header, steps: []string{"a=10/256"},
			layout: "512L 512F", at: map[string]int{"a": 256}},
		{name: "header: alignment 32", mode: buddy.Header, steps: []string{"a=1", "b=1/32"},
			layout: "32L 32F 64L 128F 256F 512F", at: map[string]int{"a": 16, "b": 96}},
		{name: "header: alignment up to 16 is the header's", mode: buddy.Header, steps: []string{"a=16/16", "b=16/8"},
			layout: "32L 32L 64F 128F 256F 512F", at: map[string]int{"a": 16, "b": 48}},

		// Alloc(0).
		{name: "zero size takes a minimal block", steps: []string{"a=0", "b=0"},
			layout: "16L 16L 32F 64F 128F 256F 512F", at: map[string]int{"a": 0, "b": 16}},
		{name: "header: zero size takes the header and a byte", mode: buddy.Header, steps: []string{"a=0"},
			layout: "32L 32F 64F 128F 256F 512F", at: map[string]int{"a": 16}},
		{name: "zero size freed", steps: []string{"a=0", "-a"}, layout: "1024F"},

		// The limit.
		{name: "limit reached", steps: []string{"a=512", "b=512", "c=16 !exhausted", "-a", "c=16"},
			layout: "16L 16F 32F 64F 128F 256F 512L", at: map[string]int{"c": 0, "b": 512}},
		{name: "free bytes in pieces", steps: []string{"a=256", "b=256", "c=256", "d=256", "-a", "-c", "e=512 !exhausted", "e=256"},
			layout: "256L 256L 256F 256L", at: map[string]int{"e": 0}},
		{name: "whole heap", steps: []string{"a=1024", "b=0 !exhausted"}, layout: "1024L"},
		{name: "header: whole heap is the header's", mode: buddy.Header, steps: []string{"a=1024 !size", "a=1008"}, layout: "1024L"},

		// Realloc.
		{name: "realloc shrinks in place", steps: []string{"a=512", "a~100"},
			layout: "128L 128F 256F 512F", at: map[string]int{"a": 0}},
		{name: "realloc to zero keeps a minimal block", steps: []string{"a=100", "a~0"},
			layout: "16L 16F 32F 64F 128F 256F 512F", at: map[string]int{"a": 0}},
		{name: "shrunk halves merge back", steps: []string{"a=512", "a~16", "-a"}, layout: "1024F"},
		{name: "realloc grows into the free buddy", steps: []string{"a=100", "a~200"},
			layout: "256L 256F 512F", at: map[string]int{"a": 0}},
		{name: "realloc grows two orders", steps: []string{"a=100", "a~500"},
			layout: "512L 512F", at: map[string]int{"a": 0}},
		{name: "realloc same order", steps: []string{"a=100", "a~128", "a~65"},
			layout: "128L 128F 256F 512F", at: map[string]int{"a": 0}},
		{name: "realloc moves when the buddy is in use", steps: []string{"a=100", "b=100", "a~200"},
			layout: "128F 128L 256L 512F", at: map[string]int{"a": 256, "b": 128}},
		{name: "realloc moves an upper half", steps: []string{"a=100", "b=100", "b~200"},
			layout: "128L 128F 256L 512F", at: map[string]int{"a": 0, "b": 256}},
		{name: "realloc past the heap fails", steps: []string{"a=100", "b=100", "a~600 !exhausted", "a~2000 !size"},
			layout: "128L 128L 256F 512F", at: map[string]int{"a": 0}},
		{name: "header: realloc grows in place", mode: buddy.Header, steps: []string{"a=100", "a~200"},
			layout: "256L 256F 512F", at: map[string]int{"a": 16}},
		{name: "header: realloc to exactly 2^k doubles", mode: buddy.Header, steps: []string{"a=48", "a~64"},
			layout: "128L 128F 256F 512F", at: map[string]int{"a": 16}},
		{name: "header: aligned payload shrinks in place", mode: buddy.Header, steps: []string{"a=200/256", "a~1"},
			layout: "512L 512F", at: map[string]int{"a": 256}},
		{name: "header: a moved block gets the plain header", mode: buddy.Header, steps: []string{"a=100/64", "b=1", "a~200"},
			layout: "256F 32L 32F 64F 128F 256L 256F", at: map[string]int{"a": 528, "b": 272}},

		// Misuse.
		{name: "double free", steps: []string{"a=16", "-a", "-a !double"}, layout: "1024F"},
		{name: "header: double free", mode: buddy.Header, steps: []string{"a=16", "-a", "-a !double"}, layout: "1024F"},
		{name: "double free of a merged block", steps: []string{"a=16", "b=16", "c=16", "-b", "-a", "-b !double"},
			layout: "32F 16L 16F 64F 128F 256F 512F"},
		{name: "stale slice into a larger block", steps: []string{"a=16", "b=16", "-a", "-b", "c=64", "-b !foreign"},
			layout: "64L 64F 128F 256F 512F", at: map[string]int{"c": 0}},
		{name: "header: stale slice, new header elsewhere", mode: buddy.Header, steps: []string{"a=10/64", "-a", "b=100", "-a !foreign", "a~5 !foreign"},
			layout: "128L 128F 256F 512F", at: map[string]int{"b": 16}},
		{name: "realloc of a freed block", steps: []string{"a=16", "-a", "a~32 !double"}, layout: "1024F"},
		{name: "bad sizes and alignments", steps: []string{"a=-1 !size", "a=16/0 !align", "a=16/3 !align", "a=16/8192 !align", "a=1025 !size", "a=1"},
			layout: "16L 16F 32F 64F 128F 256F 512F"},
		{name: "closed", steps: []string{"a=16", "close", "-a !closed", "b=16 !closed", "a~32 !closed", "close !closed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := mustNew(t, tt.mode, append([]buddy.Option{buddy.Limit(1024)}, tt.opts...)...)
			named := runScript(t, h, tt.steps)
			if got := h.Layout(); got != tt.layout {
				t.Errorf("Layout() after %q = %q, want %q", tt.steps, got, tt.layout)
			}
			lo, _ := h.Bounds()
			for name, want := range tt.at {
				if got := int(heaptest.Addr(named[name].b) - lo); got != want {
					t.Errorf("%s at offset %d, want %d", name, got, want)
				}
			}
		})
	}
}

// object is what a script knows of a name: its slice and the id whose
// pattern fills it.
type object struct {
	b  []byte
	id int
}

// runScript runs steps on h, checking each one, and returns the objects.
func runScript(t *testing.T, h *buddy.Heap, steps []string) map[string]object {
	t.Helper()
	named := map[string]object{}
	live := map[string]bool{}
	id := 0
	for _, step := range steps {
		op, errName, _ := strings.Cut(step, " !")
		wantErr := stepErrors[errName]
		if errName != "" && wantErr == nil {
			t.Fatalf("step %q: unknown error %q", step, errName)
		}
		before := h.Stats()
		var err error
		switch {
		case op == "close":
			err = h.Close()
			clear(live) // the memory is gone: nothing to verify
		case strings.HasPrefix(op, "-"):
			o := named[op[1:]]
			if live[op[1:]] {
				if i := heaptest.Intact(o.b, o.id); i >= 0 {
					t.Fatalf("step %q: byte %d lost its pattern", step, i)
				}
			}
			err = h.Free(o.b)
			if err == nil {
				delete(live, op[1:])
			}
		case strings.Contains(op, "~"):
			name, arg, _ := strings.Cut(op, "~")
			size := atoi(t, arg)
			o := named[name]
			var b []byte
			b, err = h.Realloc(o.b, size)
			if err == nil {
				if len(b) != size || cap(b) != size || heaptest.Addr(b)%16 != 0 {
					t.Fatalf("step %q: Realloc = %#x len %d cap %d, want 16-aligned, len == cap == %d", step, heaptest.Addr(b), len(b), cap(b), size)
				}
				if i := heaptest.Intact(b[:min(size, len(o.b))], o.id); i >= 0 {
					t.Fatalf("step %q: byte %d lost its pattern", step, i)
				}
				id++
				heaptest.Fill(b, id)
				named[name] = object{b, id}
			}
		default:
			name, arg, ok := strings.Cut(op, "=")
			if !ok {
				t.Fatalf("bad step %q", step)
			}
			sizeArg, alignArg, _ := strings.Cut(arg, "/")
			align := 1
			if alignArg != "" {
				align = atoi(t, alignArg)
			}
			size := atoi(t, sizeArg)
			var b []byte
			b, err = h.Alloc(size, align)
			if err == nil {
				if b == nil || len(b) != size || cap(b) != size || heaptest.Addr(b)%uintptr(align) != 0 {
					t.Fatalf("step %q: Alloc = %#x (nil %t) len %d cap %d, want aligned to %d, len == cap == %d",
						step, heaptest.Addr(b), b == nil, len(b), cap(b), align, size)
				}
				id++
				heaptest.Fill(b, id)
				named[name] = object{b, id}
				live[name] = true
			} else if b != nil {
				t.Fatalf("step %q: failed Alloc returned a slice", step)
			}
		}
		if !errors.Is(err, wantErr) || (err == nil) != (wantErr == nil) {
			t.Fatalf("step %q = %v, want %v", step, err, wantErr)
		}
		if err != nil {
			if after := h.Stats(); after != before {
				t.Fatalf("step %q failed but changed the stats from %+v to %+v", step, before, after)
			}
		}
		mustCheck(t, h, fmt.Sprintf("step %q", step))
		s := checkStats(t, h)
		var liveBytes int64
		for name := range live {
			liveBytes += int64(len(named[name].b))
		}
		if s.Live != liveBytes {
			t.Fatalf("Stats().Live after step %q = %d, want %d", step, s.Live, liveBytes)
		}
	}
	for name := range live {
		if o := named[name]; heaptest.Intact(o.b, o.id) >= 0 {
			t.Fatalf("%s lost byte %d of its pattern", name, heaptest.Intact(o.b, o.id))
		}
	}
	return named
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("bad number %q in a step", s)
	}
	return n
}

// TestTooLarge checks that a request larger than the largest block
// matches both ErrSize and ErrExhausted.
func TestTooLarge(t *testing.T) {
	for _, mode := range modes {
		h := mustNew(t, mode, buddy.Limit(1<<20))
		for _, size := range []int{1<<20 + 1, 1 << 30, int(^uint(0) >> 1)} {
			b, err := h.Alloc(size, 1)
			if b != nil || !errors.Is(err, buddy.ErrSize) || !errors.Is(err, buddy.ErrExhausted) {
				t.Errorf("%v: Alloc(%d, 1) = %#x, %v, want nil and an error matching %v and %v", mode, size, heaptest.Addr(b), err, buddy.ErrSize, buddy.ErrExhausted)
			}
		}
		mustCheck(t, h, "requests too large")
	}
}

// TestAlignment allocates sizes around the powers of two at every
// alignment, in both modes, and checks the block each one takes.
func TestAlignment(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			h := mustNew(t, mode, buddy.Limit(64<<20))
			var all [][]byte
			var wantUsed int64
			for align := 1; align <= buddy.MaxAlign; align *= 2 {
				for _, size := range []int{0, 1, 15, 16, 17, 31, 32, 33, 100, 1000, 4095, 4096, 4097} {
					b := mustAlloc(t, h, size, align)
					heaptest.Fill(b, len(all))
					all = append(all, b)
					wantUsed += int64(blockOf(mode, size, align, 16))
					if n, err := h.UsableSize(b); err != nil || n < size {
						t.Fatalf("UsableSize(Alloc(%d, %d)) = %d, %v, want at least %d", size, align, n, err, size)
					}
				}
			}
			if s := checkStats(t, h); s.Used != wantUsed {
				t.Errorf("Stats().Used = %d, want %d", s.Used, wantUsed)
			}
			for i, b := range all {
				if j := heaptest.Intact(b, i); j >= 0 {
					t.Fatalf("block %d lost byte %d", i, j)
				}
			}
		})
	}
}

// TestUsableSize checks what a block holds in each mode.
func TestUsableSize(t *testing.T) {
	tests := []struct {
		mode        buddy.Mode
		size, align int
		want        int
	}{
		{buddy.Plain, 0, 1, 16},
		{buddy.Plain, 100, 1, 128},
		{buddy.Plain, 128, 1, 128},
		{buddy.Plain, 10, 4096, 4096},
		{buddy.Header, 0, 1, 16},
		{buddy.Header, 100, 1, 112},
		{buddy.Header, 128, 1, 240},
		{buddy.Header, 10, 4096, 4096},
		{buddy.Header, 10, 64, 64},
	}
	for _, tt := range tests {
		h := mustNew(t, tt.mode, buddy.Limit(1<<20))
		b := mustAlloc(t, h, tt.size, tt.align)
		if n, err := h.UsableSize(b); n != tt.want || err != nil {
			t.Errorf("%v: UsableSize(Alloc(%d, %d)) = %d, %v, want %d, nil", tt.mode, tt.size, tt.align, n, err, tt.want)
		}
		// A Realloc up to the usable size stays in place.
		if r, err := h.Realloc(b, tt.want); err != nil || heaptest.Addr(r) != heaptest.Addr(b) {
			t.Errorf("%v: Realloc(Alloc(%d, %d), %d) = %#x, %v, want in place at %#x", tt.mode, tt.size, tt.align, tt.want, heaptest.Addr(r), err, heaptest.Addr(b))
		}
		mustCheck(t, h, "Realloc")
	}
}

// TestRefused hands each mode slices it did not hand out, or no longer
// owns, and checks that Free, Realloc and UsableSize refuse them with the
// heap unchanged.
func TestRefused(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			h := mustNew(t, mode, buddy.Limit(1<<20))
			other := mustNew(t, mode, buddy.Limit(1<<20))
			live := mustAlloc(t, h, 100, 1)
			big := mustAlloc(t, h, 5000, 64)
			freed := mustAlloc(t, h, 32, 1)
			mustFree(t, h, freed)
			lo, _ := h.Bounds()
			tests := []struct {
				name string
				b    []byte
				want error
			}{
				{"nil", nil, buddy.ErrForeign},
				{"empty Go slice", []byte{}, buddy.ErrForeign},
				{"Go memory", make([]byte, 100), buddy.ErrForeign},
				{"another heap's block", mustAlloc(t, other, 100, 1), buddy.ErrForeign},
				{"interior, 16 bytes in", live[16:], buddy.ErrForeign},
				{"interior, odd", live[3:], buddy.ErrForeign},
				{"interior of a large block", big[4096:], buddy.ErrForeign},
				{"16 bytes before the payload", heaptest.At(live, -16, 1), buddy.ErrForeign},
				{"a free block", freed, buddy.ErrDoubleFree},
				{"a free block, resliced", freed[:0], buddy.ErrDoubleFree},
				{"past the heap", heaptest.At(live, 1<<20, 1), buddy.ErrForeign},
				{"before the heap", heaptest.At(live, -int(heaptest.Addr(live)-lo)-16, 1), buddy.ErrForeign},
			}
			for _, tt := range tests {
				before := h.Stats()
				layout := h.Layout()
				err := h.Free(tt.b)
				_, rerr := h.Realloc(tt.b, 10)
				_, uerr := h.UsableSize(tt.b)
				for _, e := range []error{err, rerr, uerr} {
					if !errors.Is(e, tt.want) {
						t.Errorf("%s: Free, Realloc, UsableSize = %v, %v, %v, want %v", tt.name, err, rerr, uerr, tt.want)
						break
					}
				}
				if after := h.Stats(); after != before || h.Layout() != layout {
					t.Errorf("%s: a refused call changed the heap: %+v to %+v, %s to %s", tt.name, before, after, layout, h.Layout())
				}
				mustCheck(t, h, tt.name)
			}
		})
	}
}

// TestAllocsPerRun checks that the steady state of Alloc and Free makes no
// Go allocation: the side tables' leaves, once made, stay.
func TestAllocsPerRun(t *testing.T) {
	for _, mode := range modes {
		h := mustNew(t, mode)
		keep := mustAlloc(t, h, 100, 1) // the tables for the small orders exist
		_ = keep
		sizes := []int{16, 100, 1000, 5000, 70000}
		n := testing.AllocsPerRun(100, func() {
			for _, size := range sizes {
				b, err := h.Alloc(size, 16)
				if err != nil {
					t.Fatal(err)
				}
				if err := h.Free(b); err != nil {
					t.Fatal(err)
				}
			}
		})
		if n != 0 {
			t.Errorf("%v: Alloc and Free: %.1f Go allocations per run, want 0", mode, n)
		}
	}
}

// TestContentsAcrossRealloc grows and shrinks one block through every
// order, in place and moved, with other blocks around it, and checks that
// its bytes survive.
func TestContentsAcrossRealloc(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			h := mustNew(t, mode, buddy.Limit(8<<20))
			b := mustAlloc(t, h, 1, 1)
			heaptest.Fill(b, 1)
			var others [][]byte
			sizes := []int{7, 100, 4000, 70000, 1 << 20, 3000, 16, 0, 5, 900000}
			for i, size := range sizes {
				if i%3 == 1 {
					others = append(others, mustAlloc(t, h, 50*i, 1)) // a neighbour in the way
				}
				r, err := h.Realloc(b, size)
				if err != nil {
					t.Fatalf("Realloc(%d) = %v, want nil", size, err)
				}
				mustCheck(t, h, fmt.Sprintf("Realloc(%d)", size))
				if j := heaptest.Intact(r[:min(len(b), size)], i+1); j >= 0 {
					t.Fatalf("Realloc(%d) from %d bytes: byte %d lost", size, len(b), j)
				}
				heaptest.Fill(r, i+2)
				b = r
				checkStats(t, h)
			}
			mustFree(t, h, b)
			for _, o := range others {
				mustFree(t, h, o)
			}
			if s := checkStats(t, h); s.Live != 0 || s.Used != 0 || s.Blocks != 0 || h.Layout() != "8388608F" {
				t.Errorf("after freeing everything: Stats() = %+v, layout %s, want empty", s.Stats, h.Layout())
			}
		})
	}
}

// TestContains: a block is inside the heap, Go memory is not, and after
// Close nothing is.
func TestContains(t *testing.T) {
	h, err := buddy.New(buddy.Plain)
	if err != nil {
		t.Fatal(err)
	}
	heaptest.ContainsUntilClose(t, h, mustAlloc(t, h, 100, 16))
}

// TestFreeShorter frees blocks through slices shorter than the ones
// handed out, which Free accepts (it takes the length as the bytes asked
// for): unrelated allocations afterwards, on slow paths where checked
// builds run the checker, must succeed, and Stats must still read
// 0 <= Live <= Used - HeaderBytes.
func TestFreeShorter(t *testing.T) {
	for _, mode := range []buddy.Mode{buddy.Plain, buddy.Header} {
		for _, tt := range []struct {
			name  string
			slice func([]byte) []byte
		}{
			{"capacity cut", func(b []byte) []byte { return b[:50:50] }},
			{"length cut", func(b []byte) []byte { return b[:50] }},
			{"empty", func(b []byte) []byte { return b[:0] }},
		} {
			t.Run(mode.String()+", "+tt.name, func(t *testing.T) {
				h := mustNew(t, mode)
				b := mustAlloc(t, h, 100, 8)
				if err := h.Free(tt.slice(b)); err != nil {
					t.Fatalf("Free(%d bytes of a 100-byte block) = %v, want nil", len(tt.slice(b)), err)
				}
				checkStats(t, h)
				// Large blocks far from the first: the heap commits
				// granules for them, a slow path.
				for _, size := range []int{8, 300 << 10, 3 << 20} {
					mustAlloc(t, h, size, 8)
					checkStats(t, h)
				}
			})
		}
	}
}

// TestClose checks every method after Close against the contract: later
// calls return ErrClosed, and the queries report an empty heap.
func TestClose(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			h, err := buddy.New(mode, buddy.Limit(1<<20))
			if err != nil {
				t.Fatal(err)
			}
			b := mustAlloc(t, h, 100, 8)
			mustFree(t, h, mustAlloc(t, h, 5000, 64))
			if err := h.Close(); err != nil {
				t.Fatalf("Close() = %v, want nil", err)
			}
			mustCheck(t, h, "Close")
			if got, err := h.Alloc(100, 8); got != nil || !errors.Is(err, buddy.ErrClosed) {
				t.Errorf("Alloc after Close = %#x, %v, want nil, %v", heaptest.Addr(got), err, buddy.ErrClosed)
			}
			for _, x := range [][]byte{b, nil, make([]byte, 8)} {
				if err := h.Free(x); !errors.Is(err, buddy.ErrClosed) {
					t.Errorf("Free(%#x) after Close = %v, want %v", heaptest.Addr(x), err, buddy.ErrClosed)
				}
				if got, err := h.Realloc(x, 10); got != nil || !errors.Is(err, buddy.ErrClosed) {
					t.Errorf("Realloc(%#x, 10) after Close = %#x, %v, want nil, %v", heaptest.Addr(x), heaptest.Addr(got), err, buddy.ErrClosed)
				}
				if n, err := h.UsableSize(x); n != 0 || !errors.Is(err, buddy.ErrClosed) {
					t.Errorf("UsableSize(%#x) after Close = %d, %v, want 0, %v", heaptest.Addr(x), n, err, buddy.ErrClosed)
				}
			}
			if n, err := h.Trim(); n != 0 || !errors.Is(err, buddy.ErrClosed) {
				t.Errorf("Trim after Close = %d, %v, want 0, %v", n, err, buddy.ErrClosed)
			}
			if err := h.Close(); !errors.Is(err, buddy.ErrClosed) {
				t.Errorf("second Close = %v, want %v", err, buddy.ErrClosed)
			}
			if h.Contains(b) {
				t.Errorf("Contains(%#x) after Close = true, want false", heaptest.Addr(b))
			}
			if n := h.Footprint(); n != 0 {
				t.Errorf("Footprint() after Close = %d, want 0", n)
			}
			if st := h.Stats(); st.Stats != (carve.Stats{}) || st.Blocks != 0 || st.FreeBlocks != 0 {
				t.Errorf("Stats() after Close = %+v, want zeros", st)
			}
			if m := h.Map(); len(m.Segments) != 0 || m.Size != 0 {
				t.Errorf("Map() after Close = %d segments over %d bytes, want none", len(m.Segments), m.Size)
			}
		})
	}
}

// TestMetadata checks that Stats.Metadata, the Go memory of the side
// tables, is there from the start (the roots' free bits), grows as blocks
// spread over more of the address range, and is zero after Close. It is
// the embedded carve.Stats field, which the lab reads.
func TestMetadata(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			h := mustNew(t, mode, buddy.Limit(1<<30))
			st := h.Stats()
			if st.Metadata <= 0 || st.Stats.Metadata != st.Metadata {
				t.Fatalf("Stats().Metadata of a new heap = %d (carve.Stats says %d), want above 0", st.Metadata, st.Stats.Metadata)
			}
			last := st.Metadata
			blocks := 0
			for _, n := range []int{1 << 10, 1 << 14, 1 << 17} {
				for ; blocks < n; blocks++ {
					if _, err := h.Alloc(16, 8); err != nil {
						t.Fatal(err)
					}
				}
				st := h.Stats()
				if st.Metadata <= last {
					t.Errorf("%d blocks of 16 bytes: Stats().Metadata = %d, want above %d", n, st.Metadata, last)
				}
				last = st.Metadata
			}
			if err := h.Close(); err != nil {
				t.Fatal(err)
			}
			if st := h.Stats(); st.Metadata != 0 {
				t.Errorf("Stats().Metadata after Close = %d, want 0", st.Metadata)
			}
		})
	}
}
