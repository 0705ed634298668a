package pool_test

import (
	"errors"
	"math/bits"
	"strings"
	"testing"
	"unsafe"

	"github.com/carvelab/carve/internal/heaptest"
	"github.com/carvelab/carve/internal/typecheck"
	"github.com/carvelab/carve/pool"
)

type point struct {
	X, Y float64
	Tag  [4]uint16
}

type nested struct {
	ID    int64
	Where point
	Hist  [3]struct {
		N   uint32
		Sum float32
	}
}

type inner struct {
	N    int
	Name string
}

type outer struct {
	A  int
	In inner
}

type wide struct {
	F float64
	N int64
	B byte
}

// ofCase builds a typed handle for one type and reports what it made.
type ofCase struct {
	name string
	// build makes the handle, returning the chunk size of its pool and the
	// type's size and alignment.
	build func() (chunk, size, align int, err error)
	// For a refused type: the field path the error must name.
	path string
}

func ofFor[T any](name, path string, opts ...pool.Option) ofCase {
	return ofCase{name: name, path: path, build: func() (int, int, int, error) {
		o, err := pool.NewOf[T](opts...)
		var zero T
		size, align := int(unsafe.Sizeof(zero)), int(unsafe.Alignof(zero))
		if err != nil {
			return 0, size, align, err
		}
		defer o.Pool().Close()
		return o.Pool().ChunkSize(), size, align, nil
	}}
}

func TestNewOfAccepts(t *testing.T) {
	tests := []ofCase{
		ofFor[int64]("int64", ""),
		ofFor[[8]uint32]("[8]uint32", ""),
		ofFor[point]("struct of floats and an array", ""),
		ofFor[nested]("nested structs", ""),
		ofFor[uintptr]("uintptr", ""),
		ofFor[[0]*int]("[0]*int", ""),
		ofFor[struct{}]("struct{}", ""),
		ofFor[byte]("1-byte type", ""),
		ofFor[[3]byte]("3-byte array", ""),
		ofFor[complex128]("complex128", ""),
		ofFor[bool]("bool", ""),
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunk, size, _, err := tt.build()
			if err != nil {
				t.Fatalf("NewOf = %v, want nil", err)
			}
			if want := max(size, pool.LinkSize); chunk != want {
				t.Errorf("NewOf: ChunkSize() = %d, want %d (sizeof %d, at least LinkSize)", chunk, want, size)
			}
		})
	}
}

func TestNewOfRefuses(t *testing.T) {
	tests := []ofCase{
		ofFor[*int]("pointer", "*int"),
		ofFor[string]("string", "string"),
		ofFor[[]byte]("slice", "[]uint8"),
		ofFor[map[int]int]("map", "map[int]int"),
		ofFor[chan int]("chan", "chan int"),
		ofFor[func()]("func", "func()"),
		ofFor[any]("interface", "interface {}"),
		ofFor[error]("named interface", "error"),
		ofFor[unsafe.Pointer]("unsafe.Pointer", "Pointer"),
		ofFor[outer]("string in a nested struct", "outer.In.Name"),
		ofFor[[2]string]("[2]string", "[2]string[0]"),
		ofFor[struct {
			N int
			P *point
		}]("pointer field of an unnamed struct", ".P"),
		ofFor[[4][2]*int]("pointer in a nested array", "[4][2]*int[0][0]"),
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, _, err := tt.build()
			if !errors.Is(err, typecheck.ErrPointers) {
				t.Fatalf("NewOf = %v, want %v", err, typecheck.ErrPointers)
			}
			if !strings.Contains(err.Error(), tt.path+" is ") {
				t.Errorf("NewOf = %q, want the message to name the field %q", err, tt.path)
			}
		})
	}
}

// TestNewOfOptions checks that the options reach the pool underneath, and
// that T's alignment wins over a smaller one.
func TestNewOfOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    []pool.Option
		wantErr error
		align   int
	}{
		{name: "default", align: 8},
		{name: "align 64", opts: []pool.Option{pool.Align(64)}, align: 64},
		{name: "align 1 raised for T", opts: []pool.Option{pool.Align(1)}, align: 8},
		{name: "align 0", opts: []pool.Option{pool.Align(0)}, wantErr: pool.ErrAlign},
		{name: "align negative", opts: []pool.Option{pool.Align(-8)}, wantErr: pool.ErrAlign},
		{name: "align 3", opts: []pool.Option{pool.Align(3)}, wantErr: pool.ErrAlign},
		{name: "align 24", opts: []pool.Option{pool.Align(24)}, wantErr: pool.ErrAlign},
		{name: "bad slab size", opts: []pool.Option{pool.SlabSize(100)}, wantErr: pool.ErrOption},
		{name: "bad limit", opts: []pool.Option{pool.Limit(1)}, wantErr: pool.ErrOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := pool.NewOf[wide](tt.opts...)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("NewOf[wide] = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			defer o.Pool().Close()
			if st := o.Pool().Stats(); st.Align != tt.align {
				t.Errorf("Stats().Align = %d, want %d", st.Align, tt.align)
			}
		})
	}
}

// TestOfNew checks that New hands out zeroed, aligned T that keep what is
// written into them, and that Free takes them back.
func TestOfNew(t *testing.T) {
	for _, align := range []int{8, 64} {
		t.Run("align "+itoa(align), func(t *testing.T) {
			o, err := pool.NewOf[wide](pool.Align(align), pool.SlabSize(4096))
			if err != nil {
				t.Fatalf("NewOf[wide] = %v, want nil", err)
			}
			defer o.Pool().Close()
			p := o.Pool()
			var ws []*wide
			for i := range 100 {
				w, err := o.New()
				if err != nil {
					t.Fatalf("New() #%d = %v, want nil", i, err)
				}
				if *w != (wide{}) {
					t.Fatalf("New() #%d = %+v, want zero", i, *w)
				}
				if a := uintptr(unsafe.Pointer(w)); a%uintptr(align) != 0 {
					t.Fatalf("New() #%d = %#x, want aligned to %d", i, a, align)
				}
				*w = wide{F: float64(i) + 0.5, N: int64(-i), B: byte(i)}
				ws = append(ws, w)
				heaptest.MustCheck(t, p, "New")
			}
			for i, w := range ws {
				if want := (wide{F: float64(i) + 0.5, N: int64(-i), B: byte(i)}); *w != want {
					t.Fatalf("*New() #%d = %+v, want %+v", i, *w, want)
				}
			}
			// A freed T comes back zeroed, though the free list wrote over
			// it (and checked builds poisoned it).
			for _, w := range ws[:50] {
				if err := o.Free(w); err != nil {
					t.Fatalf("Free(%p) = %v, want nil", w, err)
				}
				heaptest.MustCheck(t, p, "Free")
			}
			for i := range 50 {
				w, err := o.New()
				if err != nil {
					t.Fatalf("New() #%d after Free = %v, want nil", i, err)
				}
				if *w != (wide{}) {
					t.Fatalf("New() #%d after Free = %+v, want zero", i, *w)
				}
				heaptest.MustCheck(t, p, "New")
			}
			if st := checkStats(t, p); st.InUse != 100 || st.ChunkSize != int(unsafe.Sizeof(wide{})) {
				t.Errorf("Stats() = InUse %d, ChunkSize %d, want 100, %d", st.InUse, st.ChunkSize, unsafe.Sizeof(wide{}))
			}
		})
	}
}

func TestOfSmallType(t *testing.T) {
	o, err := pool.NewOf[byte]()
	if err != nil {
		t.Fatalf("NewOf[byte] = %v, want nil", err)
	}
	defer o.Pool().Close()
	a, err1 := o.New()
	b, err2 := o.New()
	if err1 != nil || err2 != nil {
		t.Fatalf("New() = %v, %v, want nil", err1, err2)
	}
	if d := uintptr(unsafe.Pointer(b)) - uintptr(unsafe.Pointer(a)); d != uintptr(pool.LinkSize) {
		t.Errorf("New(), New() = %p, %p, %d bytes apart, want LinkSize %d", a, b, d, pool.LinkSize)
	}
	*a, *b = 1, 2
	if *a != 1 || *b != 2 {
		t.Errorf("*a, *b = %d, %d, want 1, 2", *a, *b)
	}
}

func TestOfFreeForeign(t *testing.T) {
	o, err := pool.NewOf[wide]()
	if err != nil {
		t.Fatalf("NewOf[wide] = %v, want nil", err)
	}
	defer o.Pool().Close()
	other, err := pool.NewOf[wide]()
	if err != nil {
		t.Fatalf("NewOf[wide] = %v, want nil", err)
	}
	defer other.Pool().Close()
	w, err := o.New()
	if err != nil {
		t.Fatalf("New() = %v, want nil", err)
	}
	ow, err := other.New()
	if err != nil {
		t.Fatalf("New() = %v, want nil", err)
	}
	tests := []struct {
		name string
		t    *wide
	}{
		{"nil", nil},
		{"Go heap", new(wide)},
		{"another pool's", ow},
		{"interior", (*wide)(unsafe.Add(unsafe.Pointer(w), 8))},
		{"next, not handed out", (*wide)(unsafe.Add(unsafe.Pointer(w), o.Pool().Stride()))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := o.Pool().Stats()
			if err := o.Free(tt.t); !errors.Is(err, pool.ErrForeign) {
				t.Errorf("Free(%p) = %v, want %v", tt.t, err, pool.ErrForeign)
			}
			heaptest.MustCheck(t, o.Pool(), "Free of a foreign *T")
			if after := o.Pool().Stats(); after != before {
				t.Errorf("Stats() after Free(%p) = %+v, want unchanged %+v", tt.t, after, before)
			}
		})
	}
	if err := o.Free(w); err != nil {
		t.Errorf("Free(%p) = %v, want nil", w, err)
	}
}

// TestOfExhausted checks that New reports a full pool as Alloc does.
func TestOfExhausted(t *testing.T) {
	o, err := pool.NewOf[[1024]byte](pool.Limit(64 << 10))
	if err != nil {
		t.Fatalf("NewOf = %v, want nil", err)
	}
	defer o.Pool().Close()
	for i := range 64 {
		if _, err := o.New(); err != nil {
			t.Fatalf("New() #%d = %v, want nil", i, err)
		}
	}
	if v, err := o.New(); v != nil || !errors.Is(err, pool.ErrExhausted) {
		t.Errorf("New() #64 = %p, %v, want nil, %v", v, err, pool.ErrExhausted)
	}
	heaptest.MustCheck(t, o.Pool(), "exhaustion")
}

// TestNoAllocs checks that the hot paths allocate nothing on the Go heap.
func TestNoAllocs(t *testing.T) {
	p := heaptest.MustNew(t, pool.New, 64)
	if n := testing.AllocsPerRun(1000, func() {
		c, err := p.Alloc()
		if err != nil {
			panic(err)
		}
		c[0] = 1
		if err := p.Free(c); err != nil {
			panic(err)
		}
	}); n != 0 {
		t.Errorf("AllocsPerRun(Pool.Alloc + Free) = %v, want 0", n)
	}
	o, err := pool.NewOf[wide]()
	if err != nil {
		t.Fatalf("NewOf[wide] = %v, want nil", err)
	}
	defer o.Pool().Close()
	if n := testing.AllocsPerRun(1000, func() {
		w, err := o.New()
		if err != nil {
			panic(err)
		}
		w.N = 1
		if err := o.Free(w); err != nil {
			panic(err)
		}
	}); n != 0 {
		t.Errorf("AllocsPerRun(Of.New + Free) = %v, want 0", n)
	}
	heaptest.MustCheck(t, p, "AllocsPerRun")
	heaptest.MustCheck(t, o.Pool(), "AllocsPerRun")
}

// big is larger than the 64 KiB the compiler keeps a temporary on the
// stack for: zeroing one through a temporary would allocate it on the Go
// heap.
type big [128 << 10]byte

// TestOfBigValue checks that New and Free clear a T larger than 64 KiB in
// place, allocating nothing on the Go heap, and that New hands it out
// zeroed.
func TestOfBigValue(t *testing.T) {
	o, err := pool.NewOf[big]()
	if err != nil {
		t.Fatalf("NewOf[big] = %v, want nil", err)
	}
	defer o.Pool().Close()
	n := testing.AllocsPerRun(100, func() {
		v, err := o.New()
		if err != nil {
			panic(err)
		}
		if v[0] != 0 || v[len(v)-1] != 0 {
			panic("New handed out a T that is not zero")
		}
		v[0], v[len(v)-1] = 1, 1
		if err := o.Free(v); err != nil {
			panic(err)
		}
	})
	if n != 0 {
		t.Errorf("AllocsPerRun(New + Free of a %d-byte T) = %v, want 0", len(big{}), n)
	}
}

// TestNewOfHuge checks that a type too large for a chunk is refused with
// an error.
func TestNewOfHuge(t *testing.T) {
	if bits.UintSize < 64 {
		t.Skip("1 TiB types need a 64-bit platform")
	}
	if o, err := pool.NewOf[[1 << (bits.UintSize - 24)]byte](); o != nil || !errors.Is(err, pool.ErrChunkSize) {
		t.Errorf("NewOf[[1 TiB]byte] = %v, %v, want nil, %v", o, err, pool.ErrChunkSize)
	}
}

// TestOfClosed checks the typed handle after its pool's Close: New and
// Free return ErrClosed.
func TestOfClosed(t *testing.T) {
	o, err := pool.NewOf[wide]()
	if err != nil {
		t.Fatalf("NewOf[wide] = %v, want nil", err)
	}
	w, err := o.New()
	if err != nil {
		t.Fatalf("New() = %v, want nil", err)
	}
	if err := o.Pool().Close(); err != nil {
		t.Fatalf("Close() = %v, want nil", err)
	}
	if v, err := o.New(); v != nil || !errors.Is(err, pool.ErrClosed) {
		t.Errorf("New() after Close = %p, %v, want nil, %v", v, err, pool.ErrClosed)
	}
	if err := o.Free(w); !errors.Is(err, pool.ErrClosed) {
		t.Errorf("Free() after Close = %v, want %v", err, pool.ErrClosed)
	}
}
