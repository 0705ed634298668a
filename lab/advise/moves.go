package advise

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/pool"
)

// A Move is one type moved off the Go heap into one carve allocator. The
// route its replays take (Route) and the code printed for it (Code) are
// both made from it and from nothing else, so that the code is what was
// measured.
type Move struct {
	// Type is the type's Go name ("[]byte", "main.Meta"), Label the
	// trace's ("uint8"); Elem the size of one of its elements (of the
	// type itself, for a type that is no slice).
	Type  string `json:"type"`
	Label string `json:"label"`
	Elem  int64  `json:"elem_size"`
	// Site, when not "", narrows the move to the type's objects
	// allocated there (trace.AttrSite): the code goes at that site.
	Site string `json:"site,omitempty"`
	// Into is where its objects go: pools or one heap.
	Into replay.Target `json:"into"`
	// Chunk, into pools for a type of one size that is no slice, is
	// pool.NewOf[T]'s chunk, the type's own size: one pool, each object
	// at that size.
	Chunk int `json:"chunk,omitempty"`
	// Sizes are, into pools for a slice (or a type of many sizes), the
	// pools' chunks, one per size the trace gives its objects (at least
	// pool.LinkSize), in increasing order: every object of the type goes
	// to the pool of its size.
	Sizes []int `json:"sizes,omitempty"`
}

// Route is the route of the move's replays.
func (m Move) Route() replay.Route {
	return replay.Route{Label: m.Label, Name: m.Type, Into: m.Into, Chunk: m.Chunk, Site: m.Site}
}

// Kind names the move's code: "pool.NewOf", "pools" or "heap".
func (m Move) Kind() string {
	switch {
	case m.Into == replay.IntoHeap:
		return "heap"
	case m.Chunk > 0:
		return "pool.NewOf"
	}
	return "pools"
}

// slice reports whether the move's type is a slice of its elements.
func (m Move) slice() bool { return strings.HasPrefix(m.Type, "[]") }

// moves returns the moves a candidate is measured in: for a type of one
// size that is no slice, one pool of the type's own size
// (pool.NewOf[T]) and a heap; for a slice or a type of many sizes, a
// heap and a pool per size.
func moves(t TypeTrial) []Move {
	m := Move{Type: t.Type, Label: t.Label, Elem: t.Size, Site: t.Site}
	heap := m
	heap.Into = replay.IntoHeap
	if len(t.Sizes) == 1 && !heap.slice() {
		typed := m
		typed.Into, typed.Chunk = replay.IntoPools, int(t.Size)
		if t.Size <= 0 { // a label without the type's size: its slot's
			typed.Chunk = t.Sizes[0].Size
		}
		return []Move{typed, heap}
	}
	pools := m
	pools.Into = replay.IntoPools
	for _, s := range t.Sizes {
		pools.Sizes = append(pools.Sizes, chunk(s.Size))
	}
	slices.Sort(pools.Sizes)
	pools.Sizes = slices.Compact(pools.Sizes)
	return []Move{heap, pools}
}

// codeImports is the first line of the code: the packages it uses.
const codeImports = "// import \"github.com/carvelab/carve/pool\", \"github.com/carvelab/carve/heap\" (and \"slices\", \"unsafe\" where used)\n"

// Code returns the Go code that makes the moves: for each, the
// allocator, its limit, its Close, the allocation in place of the
// program's and where the Free goes.
func Code(ms []Move) string {
	if len(ms) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(codeImports)
	seen := map[string]int{} // a name made for an earlier move -> how many have it
	for i, m := range ms {
		if i > 0 {
			b.WriteString("\n")
		}
		m.code(&b, i, seen)
	}
	return b.String()
}

// code writes one move's code; i numbers it, for names, and seen counts
// the names given so far: a second move of one type (at another site)
// gets its own ("bufs2").
func (m Move) code(b *strings.Builder, i int, seen map[string]int) {
	pkg, name := splitType(m.Type)
	elem := strings.TrimPrefix(name, "[]")
	in := ""
	if pkg != "" {
		in = " (package " + pkg + ")"
	}
	if m.Site != "" {
		fmt.Fprintf(b, "// at %s, where the program allocates them: the code below goes there\n", m.Site)
	}
	v := varName(elem, i)
	if m.slice() {
		v = strings.TrimSuffix(v, "s") + "Bufs"
		if elem == "byte" {
			v = "bufs"
		}
	}
	seen[v]++
	suffix := ""
	if n := seen[v]; n > 1 {
		suffix = strconv.Itoa(n)
	}
	base := v // the pools' names are made from it
	v += suffix
	check := "if err != nil {\n\treturn err\n}\n"
	switch m.Kind() {
	case "pool.NewOf":
		fmt.Fprintf(b, "// %s%s in one pool of %d-byte chunks, in place of new(%s)\n", name, in, m.Chunk, name)
		fmt.Fprintf(b, "%s, err := pool.NewOf[%s]() // pool.Limit(n) caps the bytes it holds\n%s", v, name, check)
		fmt.Fprintf(b, "defer %s.Pool().Close() // after the last Free\n", v)
		fmt.Fprintf(b, "x, err := %s.New() // in place of new(%s) or &%s{...}: *x is zeroed; err when the pool is at its limit\n", v, name, name)
		fmt.Fprintf(b, "%s.Free(x) // where the program drops x, and on every replace, before x is overwritten\n", v)
	case "heap":
		if !m.slice() {
			fmt.Fprintf(b, "// %s%s in one carve heap, in place of new(%s) (measured at the size the trace gives each, its size class)\n", name, in, name)
			fmt.Fprintf(b, "%s, err := heap.New() // heap.Limit(n) caps the bytes it holds\n%s", v, check)
			fmt.Fprintf(b, "defer %s.Close() // after the last Free\n", v)
			fmt.Fprintf(b, "b, err := %s.Alloc(int(unsafe.Sizeof(%s{})), int(unsafe.Alignof(%s{})))\n%s", v, name, name, check)
			fmt.Fprintf(b, "x := (*%s)(unsafe.Pointer(unsafe.SliceData(b)))\n", name)
			fmt.Fprintf(b, "%s.Free(b) // where the program drops x, and on every replace, before x is overwritten\n", v)
			return
		}
		fmt.Fprintf(b, "// %s%s of every length in one carve heap, in place of make(%s, n) (measured at the size the trace gives each, its size class: a heap given n holds less)\n", name, in, name)
		fmt.Fprintf(b, "%s, err := heap.New() // heap.Limit(n) caps the bytes it holds\n%s", v, check)
		fmt.Fprintf(b, "defer %s.Close() // after the last Free\n", v)
		if elem == "byte" {
			fmt.Fprintf(b, "b, err := %s.Alloc(n, 1) // len(b) == n; err when the heap is at its limit\n", v)
		} else {
			fmt.Fprintf(b, "b, err := %s.Alloc(n*%d, %d) // n elements of %d bytes\n", v, m.Elem, min(max(m.Elem, 1), 8), m.Elem)
			fmt.Fprintf(b, "s := unsafe.Slice((*%s)(unsafe.Pointer(unsafe.SliceData(b))), n)\n", elem)
		}
		fmt.Fprintf(b, "%s.Free(b) // where the program drops it, and on every replace, before it is overwritten\n", v)
	default: // pools, one per size
		sizes := make([]string, len(m.Sizes))
		for j, s := range m.Sizes {
			sizes[j] = strconv.Itoa(s)
		}
		unit := "n"
		if elem != "byte" {
			unit = fmt.Sprintf("n*%d", m.Elem)
		}
		sz := strings.TrimSuffix(base, "Bufs") + "Sizes"
		if base == "bufs" {
			sz = "bufSizes"
		}
		ps := strings.TrimSuffix(sz, "Sizes") + "Pools"
		sz, ps = sz+suffix, ps+suffix
		fmt.Fprintf(b, "// %s%s in pools, one per size the trace gives its objects (%d: their size classes), in place of make(%s, n)\n", name, in, len(m.Sizes), name)
		fmt.Fprintf(b, "%s := []int{%s}\n", sz, strings.Join(sizes, ", "))
		fmt.Fprintf(b, "%s := make([]*pool.Pool, len(%s))\n", ps, sz)
		fmt.Fprintf(b, "for i, size := range %s {\n\tp, err := pool.New(size) // pool.Limit(n) caps the bytes it holds\n\tif err != nil {\n\t\treturn err\n\t}\n\tdefer p.Close() // after the last Free\n\t%s[i] = p\n}\n", sz, ps)
		fmt.Fprintf(b, "// for %s bytes up to %d (above, make):\n", unit, m.Sizes[len(m.Sizes)-1])
		fmt.Fprintf(b, "i, _ := slices.BinarySearch(%s, %s)\n", sz, unit)
		fmt.Fprintf(b, "b, err := %s[i].Alloc() // err when the pool is at its limit\n%s", ps, check)
		if elem == "byte" {
			b.WriteString("b = b[:n]\n")
		} else {
			fmt.Fprintf(b, "s := unsafe.Slice((*%s)(unsafe.Pointer(unsafe.SliceData(b))), n)\n", elem)
		}
		fmt.Fprintf(b, "// where the program drops it, and on every replace, before it is overwritten:\n")
		fmt.Fprintf(b, "j, _ := slices.BinarySearch(%s, cap(b))\n%s[j].Free(b)\n", sz, ps)
	}
}

// chunk is the chunk a pool of a replay's route makes for objects of n
// bytes: pool.New takes no less than pool.LinkSize.
func chunk(n int) int { return max(n, pool.LinkSize) }
