package arena_test

import (
	"testing"
	"unsafe"

	"github.com/carvelab/carve/arena"
)

// persons is the bump allocator post's count: one benchmark iteration
// allocates this many Person values.
const persons = 5_000_000

// Person must be the post's 36 bytes, or the comparison is off.
var _ [36]struct{} = [unsafe.Sizeof(Person{})]struct{}{}

// sink keeps the compiler from dropping the writes into each Person.
var sink byte

// BenchmarkPerson is the post's benchmark, both sides in one run: 5M
// Person values from a pre-faulted arena through the typed handle, then
// Reset; against 5M new(Person) on the Go heap, all kept live until the
// next iteration (as the post keeps all 5M mallocs live before freeing
// them), so the garbage collector's share is counted. One iteration is
// 5M allocations; ns/alloc divides by them.
func BenchmarkPerson(b *testing.B) {
	b.Run("arena", func(b *testing.B) {
		a, err := arena.New()
		if err != nil {
			b.Fatal(err)
		}
		defer a.Release()
		// The post memsets its arena before timing: measure allocation,
		// not first-touch page faults.
		if err := a.Prefault(persons * int(unsafe.Sizeof(Person{}))); err != nil {
			b.Fatal(err)
		}
		people, err := arena.NewOf[Person](a)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			for i := range persons {
				p, err := people.New()
				if err != nil {
					b.Fatal(err)
				}
				p.ID = int32(i)
				p.Name[0] = 'A'
				sink = p.Name[0]
			}
			a.Reset()
		}
		reportPerAlloc(b)
	})
	b.Run("goheap", func(b *testing.B) {
		ptrs := make([]*Person, persons)
		for b.Loop() {
			for i := range ptrs {
				p := new(Person)
				p.ID = int32(i)
				p.Name[0] = 'A'
				sink = p.Name[0]
				ptrs[i] = p
			}
		}
		reportPerAlloc(b)
	})
}

// reportPerAlloc adds the cost of one allocation to the benchmark's line.
func reportPerAlloc(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/persons, "ns/alloc")
}

// BenchmarkAlloc measures the fast path of Alloc alone: 64-byte requests
// into a block that is already resident, with a Reset every block-full.
func BenchmarkAlloc(b *testing.B) {
	a, err := arena.New()
	if err != nil {
		b.Fatal(err)
	}
	defer a.Release()
	const perBlock = arena.DefaultBlockSize / 64
	if err := a.Prefault(arena.DefaultBlockSize); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		if i++; i == perBlock {
			a.Reset()
			i = 0
		}
		p, err := a.Alloc(64, 8)
		if err != nil {
			b.Fatal(err)
		}
		p[0] = byte(i)
		sink = p[0]
	}
}
