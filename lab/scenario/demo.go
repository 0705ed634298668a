package scenario

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"time"
	"unsafe"

	"github.com/carvelab/carve/arena"
	"github.com/carvelab/carve/mem"
	"github.com/carvelab/carve/pool"
)

// DemoConfig sizes the demonstrations; tests run them smaller.
type DemoConfig struct {
	Connections int // the connection scenario's connections
	Persons     int // the bump benchmark's Person values
}

// DefaultDemo is the demonstrations at the sources' own sizes.
var DefaultDemo = DemoConfig{Connections: 100_000, Persons: 5_000_000}

// Demo runs every demonstration in turn: the article's pool.cpp, the
// stride of a pool's chunks, the connection scenario with the buffers in
// carve pools, and the bump arena. A failed check is an error.
func Demo(w io.Writer, cfg DemoConfig) error {
	fmt.Fprintln(w, "carve: the fixed-size pool and the bump arena, on the block-allocator article's experiments")
	for _, step := range []struct {
		title string
		run   func(io.Writer, DemoConfig) error
	}{
		{"pool.cpp: a pool of four chunks", demoFourChunks},
		{"stride: what one chunk costs", demoStride},
		{"the connection scenario, with the buffers in carve pools", demoConnection},
		{"the bump arena", demoArena},
	} {
		fmt.Fprintf(w, "\n== %s ==\n", step.title)
		if err := step.run(w, cfg); err != nil {
			return fmt.Errorf("%s: %w", step.title, err)
		}
	}
	return nil
}

// demoFourChunks is the article's pool.cpp: four chunks are four distinct
// addresses, a fifth request is refused, and a freed chunk is the next one
// handed out.
func demoFourChunks(w io.Writer, _ DemoConfig) error {
	const chunk = 64
	p, err := pool.Over(make([]byte, 4*chunk), chunk)
	if err != nil {
		return err
	}
	defer p.Close()
	var got [4][]byte
	seen := map[*byte]bool{}
	for i := range got {
		if got[i], err = p.Alloc(); err != nil {
			return err
		}
		seen[&got[i][0]] = true
	}
	_, err = p.Alloc()
	fifthRefused := errors.Is(err, pool.ErrExhausted)
	fmt.Fprintf(w, "fifth is null: %d, distinct: %d\n", b2i(fifthRefused), b2i(len(seen) == 4))
	if err := p.Free(got[2]); err != nil {
		return err
	}
	again, err := p.Alloc()
	if err != nil {
		return err
	}
	reused := &again[0] == &got[2][0]
	fmt.Fprintf(w, "freed chunk reused: %d\n", b2i(reused))
	fmt.Fprintf(w, "(the fifth request: %v)\n", errOrNone(fifthRefused, err))
	if !fifthRefused || len(seen) != 4 || !reused {
		return errors.New("the pool broke the article's check")
	}
	return nil
}

// demoStride shows that a chunk in use carries no header: chunks of 16
// bytes lie 16 bytes apart (glibc's malloc puts two 16-byte requests 32
// bytes apart), and the only cost is rounding up to the alignment.
func demoStride(w io.Writer, _ DemoConfig) error {
	for _, c := range []struct{ size, align int }{{16, 8}, {40, 8}, {40, 16}, {36, 4}} {
		p, err := pool.New(c.size, pool.Align(c.align))
		if err != nil {
			return err
		}
		a, err := p.Alloc()
		if err != nil {
			return err
		}
		b, err := p.Alloc()
		if err != nil {
			return err
		}
		apart := uintptr(unsafe.Pointer(&b[0])) - uintptr(unsafe.Pointer(&a[0]))
		st := p.Stats()
		fmt.Fprintf(w, "pool(%d, align %d): two chunks %d bytes apart, %d usable; per chunk %d B padding, no header\n",
			c.size, c.align, apart, len(a), (st.Used-st.Live)/st.InUse)
		if err := p.Close(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "(the article, on glibc: malloc(16) twice: 32 bytes apart, malloc_usable_size = 24)")
	return nil
}

// demoConnection runs the article's connection scenario with the 1 KiB
// scratch buffers in one pool and the 64-byte sessions in another, then
// allocates a new buffer per connection: 1 KiB buffers reuse the scratch
// chunks and the process does not grow; 4 KiB buffers cannot (the article's
// point: a pool must exist before the fragmentation), and grow it by what
// they take. Trim then gives the empty slabs back and RSS falls.
func demoConnection(w io.Writer, cfg DemoConfig) error {
	n := cfg.Connections
	for _, next := range []int{1024, 4096} {
		scratch, err := pool.New(1024, pool.Limit(1<<30))
		if err != nil {
			return err
		}
		sessions, err := pool.New(64, pool.Limit(1<<30))
		if err != nil {
			return err
		}
		bufs := scratch
		if next != 1024 {
			if bufs, err = pool.New(next, pool.Limit(1<<30)); err != nil {
				return err
			}
		}
		held := make([][]byte, n)
		for i := range n {
			if held[i], err = scratch.Alloc(); err != nil {
				return err
			}
			fill(held[i])
			s, err := sessions.Alloc()
			if err != nil {
				return err
			}
			fill(s)
		}
		afterSetup := rssKB()
		for _, b := range held {
			if err := scratch.Free(b); err != nil {
				return err
			}
		}
		afterFree := rssKB()
		for i := range n {
			if held[i], err = bufs.Alloc(); err != nil {
				return err
			}
			fill(held[i])
		}
		afterNew := rssKB()
		grew := afterNew - afterFree
		fmt.Fprintf(w, "pool: next buffers of %d B: RSS after setup %d KB, after freeing scratch %d KB, after %d new buffers %d KB (grew %d KB, %d MB)\n",
			next, afterSetup, afterFree, n, afterNew, grew, grew>>10)
		if next != 1024 {
			trimmed, err := scratch.Trim()
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "pool: Trim of the empty scratch pool gave back %d MB: RSS %d KB\n", trimmed>>20, rssKB())
		}
		for _, p := range []*pool.Pool{scratch, sessions, bufs} {
			if err := p.Close(); err != nil && !errors.Is(err, pool.ErrClosed) {
				return err
			}
		}
	}
	fmt.Fprintln(w, "(the article, on glibc: grew 0 MB for 1024 B and 392 MB for 4096 B, and freeing the scratch buffers never lowers RSS)")
	return nil
}

// Person is the struct of the post "Bump Allocator": 36 bytes.
type Person struct {
	ID   int32
	Name [32]byte
}

// demoArena is the example of the post "Bump Allocator" and its benchmark: 5,000,000
// Person values from a pre-faulted arena against the Go heap with all of
// them kept live, timed side by side in this run.
func demoArena(w io.Writer, cfg DemoConfig) error {
	a, err := arena.New()
	if err != nil {
		return err
	}
	defer a.Release()
	ints, err := arena.NewOf[int32](a)
	if err != nil {
		return err
	}
	people, err := arena.NewOf[Person](a)
	if err != nil {
		return err
	}
	num, err := ints.New()
	if err != nil {
		return err
	}
	*num = 42
	user, err := people.New()
	if err != nil {
		return err
	}
	user.ID = 101
	copy(user.Name[:], "ABCxyz")
	fmt.Fprintf(w, "int variable: %d\n", *num)
	fmt.Fprintf(w, "user id: %d, name: %s\n", user.ID, cstring(user.Name[:]))
	st := a.Stats()
	fmt.Fprintf(w, "arena: %d bytes live, %d used (%d lost to alignment), %d KB committed\n", st.Live, st.Used, st.AlignWaste, st.Footprint>>10)
	a.Reset()

	n := cfg.Persons
	if err := a.Prefault(n*int(unsafe.Sizeof(Person{})) + 1<<20); err != nil {
		return err
	}
	start := time.Now()
	for i := range n {
		p, err := people.New()
		if err != nil {
			return err
		}
		p.ID = int32(i)
		p.Name[0] = 'A'
	}
	arenaTime := time.Since(start)
	st = a.Stats()
	a.Reset()

	runtime.GC()
	held := make([]*Person, n)
	start = time.Now()
	for i := range held {
		p := new(Person)
		p.ID = int32(i)
		p.Name[0] = 'A'
		held[i] = p
	}
	heapTime := time.Since(start)
	runtime.KeepAlive(held)
	fmt.Fprintf(w, "bump allocator: %d Person in %v (%d MB, %d blocks)\n", n, arenaTime.Round(time.Millisecond), st.Used>>20, st.Blocks)
	fmt.Fprintf(w, "Go heap, all kept live: %v; the arena %.1fx faster in this run\n",
		heapTime.Round(time.Millisecond), float64(heapTime)/float64(max(arenaTime, 1)))
	fmt.Fprintln(w, "(one run on a shared machine; `go test -bench Person ./arena` measures it properly)")
	return nil
}

// fill writes every byte of b, as a program using it would, so its pages
// are resident.
func fill(b []byte) {
	for i := range b {
		b[i] = byte(i)
	}
}

func rssKB() int64 {
	n, err := mem.RSS()
	if err != nil {
		return -1
	}
	return n >> 10
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func errOrNone(ok bool, err error) string {
	if ok {
		return "refused with pool.ErrExhausted"
	}
	return fmt.Sprint("not refused: ", err)
}

func cstring(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
