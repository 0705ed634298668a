package fit_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/carvelab/carve/fit"
	"github.com/carvelab/carve/internal/heaptest"
)

// The layout tests run a script of operations on a fresh heap and compare
// the heap's blocks afterwards, in address order, with a compact string:
//
//	a48   the block in use that the script calls a, 48 bytes (header included)
//	U48   a block in use the script has no name for
//	F64   a free block of 64 bytes
//	T     the top
//
// A script is a list of operations separated by semicolons:
//
//	a NAME SIZE [ALIGN]   NAME = Alloc(SIZE, ALIGN); ALIGN defaults to 1
//	f NAME                Free(NAME)
//	r NAME SIZE           NAME = Realloc(NAME, SIZE)
//	t                     Trim()
//
// Names are lowercase letters. Each block is filled with a pattern when
// allocated and verified when freed or reallocated, and the heap is
// checked after every step.

// layout formats the heap's blocks; names gives the blocks the script
// holds.
func layout(h *fit.Heap, names map[string][]byte) string {
	lo, _ := h.Bounds()
	byOff := map[int]string{}
	for n, b := range names {
		byOff[int(heaptest.Addr(b)-lo)] = n
	}
	var sb strings.Builder
	for _, b := range h.Blocks() {
		switch n, ok := byOff[b.Off]; {
		case b.Free:
			sb.WriteString("F")
		case ok:
			sb.WriteString(n)
		default:
			sb.WriteString("U")
		}
		sb.WriteString(strconv.Itoa(b.Size))
		sb.WriteString(" ")
	}
	sb.WriteString("T")
	return sb.String()
}

// runScript runs ops on h and returns the blocks the script holds.
func runScript(t *testing.T, h *fit.Heap, ops string) map[string][]byte {
	t.Helper()
	names := map[string][]byte{}
	ids := map[string]int{}
	num := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("script %q: bad number %q", ops, s)
		}
		return n
	}
	for i, op := range strings.Split(ops, ";") {
		f := strings.Fields(op)
		if len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "a" && (len(f) == 3 || len(f) == 4):
			align := 1
			if len(f) == 4 {
				align = num(f[3])
			}
			b := mustAlloc(t, h, num(f[2]), align)
			heaptest.Fill(b, i)
			names[f[1]], ids[f[1]] = b, i
		case f[0] == "f" && len(f) == 2:
			b, ok := names[f[1]]
			if !ok {
				t.Fatalf("script %q: op %d frees %q, which it does not hold", ops, i, f[1])
			}
			if j := heaptest.Intact(b, ids[f[1]]); j >= 0 {
				t.Fatalf("script op %d (%s): block %s lost byte %d", i, op, f[1], j)
			}
			mustFree(t, h, b)
			delete(names, f[1])
		case f[0] == "r" && len(f) == 3:
			b, ok := names[f[1]]
			if !ok {
				t.Fatalf("script %q: op %d reallocates %q, which it does not hold", ops, i, f[1])
			}
			size := num(f[2])
			r, err := h.Realloc(b, size)
			if err != nil || len(r) != size || cap(r) != size {
				t.Fatalf("script op %d: Realloc(%s, %d) = len %d cap %d, %v, want len == cap == %d", i, f[1], size, len(r), cap(r), err, size)
			}
			mustCheck(t, h, op)
			if j := heaptest.Intact(r[:min(len(b), size)], ids[f[1]]); j >= 0 {
				t.Fatalf("script op %d (%s): block %s lost byte %d in Realloc", i, op, f[1], j)
			}
			heaptest.Fill(r, i)
			names[f[1]], ids[f[1]] = r, i
		case f[0] == "t" && len(f) == 1:
			if _, err := h.Trim(); err != nil {
				t.Fatalf("script op %d: Trim() = %v, want nil", i, err)
			}
			mustCheck(t, h, op)
		default:
			t.Fatalf("script %q: bad op %q", ops, op)
		}
		st := checkStats(t, h)
		var live int64
		for _, b := range names {
			live += int64(len(b))
		}
		if st.Live != live || st.Blocks != int64(len(names)) {
			t.Fatalf("script op %d (%s): Stats() = Live %d, Blocks %d, want %d, %d", i, op, st.Live, st.Blocks, live, len(names))
		}
	}
	return names
}

var layoutTests = []struct {
	name string
	ops  string
	want string                // the layout for every policy, unless per has one
	per  map[fit.Policy]string // the layouts where placement differs
}{
	// The stride and the minimal block.
	{name: "stride", ops: "a a 16; a b 16", want: "a32 b32 T"},
	{name: "alloc zero", ops: "a a 0; a b 0; a c 1", want: "a32 b32 c32 T"},
	{name: "header and rounding", ops: "a a 24; a b 25; a c 40; a d 100", want: "a32 b48 c48 d112 T"},

	// Coalescing.
	{name: "free in the middle", ops: "a a 40; a b 40; a c 40; f b", want: "a48 F48 c48 T"},
	{name: "coalesce with the free block before", ops: "a a 40; a b 40; a c 40; a d 16; f a; f b", want: "F96 c48 d32 T"},
	{name: "coalesce with the free block after", ops: "a a 40; a b 40; a c 40; a d 16; f b; f a", want: "F96 c48 d32 T"},
	{name: "coalesce both sides", ops: "a a 40; a b 40; a c 40; a d 16; f a; f c; f b", want: "F144 d32 T"},
	{name: "free the last block into the top", ops: "a a 40; a b 40; f b", want: "a48 T"},
	{name: "free before the top: both merge into the top", ops: "a a 40; a b 40; a c 40; f b; f c", want: "a48 T"},
	{name: "free everything", ops: "a a 40; a b 100; a c 16; f b; f a; f c", want: "T"},

	// Reuse, splitting and growth.
	{name: "exact fit reuses the hole", ops: "a a 40; a b 40; a c 16; f a; a d 40", want: "d48 b48 c32 T"},
	{name: "split a hole", ops: "a a 200; a b 16; f a; a c 40", want: "c48 F160 b32 T"},
	{name: "rest under MinBlock stays with the block", ops: "a a 56; a b 16; f a; a c 40", want: "c64 b32 T"},
	{name: "no hole fits: grow at the top", ops: "a a 40; a b 100; a c 16; f a; a d 100", want: "F48 b112 c32 d112 T"},
	{name: "next fit wraps around", ops: "a ha 56; a sa 16; a hb 120; a sb 16; f hb; f ha; a x 88; a y 40", want: "y64 sa32 x96 F32 sb32 T"},
	{name: "trim keeps the blocks", ops: "a a 40; a b 40; f a; t", want: "F48 b48 T"},

	// Realloc.
	{name: "realloc shrinks in place", ops: "a a 200; a b 16; r a 40", want: "a48 F160 b32 T"},
	{name: "realloc shrink, rest under MinBlock", ops: "a a 56; a b 16; r a 40", want: "a64 b32 T"},
	{name: "realloc shrink merges the rest with a free block", ops: "a a 200; a b 40; a c 16; f b; r a 40", want: "a48 F208 c32 T"},
	{name: "realloc shrink at the top gives the rest to the top", ops: "a a 40; a b 1000; r b 16", want: "a48 b32 T"},
	{name: "realloc grows into the free block after", ops: "a a 40; a b 100; a c 16; f b; r a 100", want: "a112 F48 c32 T"},
	{name: "realloc takes the whole free block after", ops: "a a 40; a b 40; a c 16; f b; r a 80", want: "a96 c32 T"},
	{name: "realloc at the top grows the top", ops: "a a 40; a b 16; r b 1000", want: "a48 b1008 T"},
	{name: "realloc moves", ops: "a a 40; a b 16; r a 100", want: "F48 b32 a112 T"},
	{name: "realloc to zero keeps a minimal block", ops: "a a 100; a b 16; r a 0", want: "a32 F80 b32 T"},

	// Alignment.
	{name: "aligned at the top, gap under MinBlock skipped", ops: "a a 16; a b 100 64", want: "a32 F80 b112 T"},
	{name: "aligned at the top, no gap", ops: "a a 40; a b 16 64", want: "a48 b32 T"},
	{name: "aligned gap merges back on free", ops: "a a 16; a b 100 64; f b", want: "a32 T"},
	{name: "aligned from a free block", ops: "a a 16; a h 500; a c 16; f h; a b 16 256", want: "a32 F208 b32 F272 c32 T"},

	// Placement: where the policies choose different holes.
	{
		name: "four policies, four holes",
		// Holes of 96, 48, 64 and 176 bytes in address order, freed so
		// that the list reads 64, 176, 96, 48. A request of 112 splits
		// the 176 everywhere; then one of 48 bytes goes to the first
		// fitting hole on the list (64), the rover (the 176's rest of
		// 64), the smallest fit (48), or the lowest fit (96).
		ops: "a ha 88; a sa 16; a hb 40; a sb 16; a hc 56; a sc 16; a hd 168; a sd 16; f hb; f ha; f hd; f hc; a x 104; a y 40",
		per: map[fit.Policy]string{
			fit.FirstFit:               "F96 sa32 F48 sb32 y64 sc32 x112 F64 sd32 T",
			fit.NextFit:                "F96 sa32 F48 sb32 F64 sc32 x112 y64 sd32 T",
			fit.BestFit:                "F96 sa32 y48 sb32 F64 sc32 x112 F64 sd32 T",
			fit.AddressOrderedFirstFit: "y48 F48 sa32 F48 sb32 F64 sc32 x112 F64 sd32 T",
		},
	},
	{
		name: "first fit starts at the head, next fit at the rover",
		ops:  "a ha 56; a sa 16; a hb 120; a sb 16; f hb; f ha; a x 88; a y 16",
		per: map[fit.Policy]string{
			fit.FirstFit:               "y32 F32 sa32 x96 F32 sb32 T",
			fit.NextFit:                "F64 sa32 x96 y32 sb32 T",
			fit.BestFit:                "F64 sa32 x96 y32 sb32 T",
			fit.AddressOrderedFirstFit: "y32 F32 sa32 x96 F32 sb32 T",
		},
	},
	{
		name: "best fit among large blocks",
		ops:  "a ha 3000; a sa 16; a hb 1496; a sb 16; a hc 1992; a sc 16; f hb; f hc; f ha; a x 1400",
		per: map[fit.Policy]string{
			fit.FirstFit:               "x1408 F1600 sa32 F1504 sb32 F2000 sc32 T",
			fit.NextFit:                "x1408 F1600 sa32 F1504 sb32 F2000 sc32 T",
			fit.BestFit:                "F3008 sa32 x1408 F96 sb32 F2000 sc32 T",
			fit.AddressOrderedFirstFit: "x1408 F1600 sa32 F1504 sb32 F2000 sc32 T",
		},
	},
	{
		name: "equal small sizes: the list and the bins take the most recent",
		ops:  "a ha 40; a sa 16; a hb 40; a sb 16; f ha; f hb; a x 40",
		per: map[fit.Policy]string{
			fit.FirstFit:               "F48 sa32 x48 sb32 T",
			fit.NextFit:                "F48 sa32 x48 sb32 T",
			fit.BestFit:                "F48 sa32 x48 sb32 T",
			fit.AddressOrderedFirstFit: "x48 sa32 F48 sb32 T",
		},
	},
	{
		name: "equal large sizes: the tree takes the lowest address",
		ops:  "a ha 1992; a sa 16; a hb 1992; a sb 16; f ha; f hb; a x 1992",
		per: map[fit.Policy]string{
			fit.FirstFit:               "F2000 sa32 x2000 sb32 T",
			fit.NextFit:                "F2000 sa32 x2000 sb32 T",
			fit.BestFit:                "x2000 sa32 F2000 sb32 T",
			fit.AddressOrderedFirstFit: "x2000 sa32 F2000 sb32 T",
		},
	},
	{
		name: "realloc moves to the hole the policy picks",
		ops:  "a ha 88; a sa 16; a hb 40; a sb 16; a c 16; a d 16; f hb; f ha; r c 40",
		per: map[fit.Policy]string{
			fit.FirstFit:               "c48 F48 sa32 F48 sb32 F32 d32 T",
			fit.NextFit:                "c48 F48 sa32 F48 sb32 F32 d32 T",
			fit.BestFit:                "F96 sa32 c48 sb32 F32 d32 T",
			fit.AddressOrderedFirstFit: "c48 F48 sa32 F48 sb32 F32 d32 T",
		},
	},
}

func TestLayout(t *testing.T) {
	for _, tt := range layoutTests {
		t.Run(tt.name, func(t *testing.T) {
			each(t, func(t *testing.T, p fit.Policy) {
				want, ok := tt.per[p]
				if !ok {
					want = tt.want
				}
				if want == "" {
					t.Fatalf("no layout to expect for %v", p)
				}
				h := mustNew(t, p)
				names := runScript(t, h, tt.ops)
				if got := layout(h, names); got != want {
					t.Errorf("after %q:\ngot  %s\nwant %s", tt.ops, got, want)
				}
			})
		})
	}
}
