package arena

import (
	"errors"
	"math"
	"math/bits"
	"strings"
	"testing"
	"unsafe"

	"github.com/carvelab/carve/internal/typecheck"
)

type plain struct {
	A int64
	B float64
	C [4]int16
	D bool
}

type nested struct {
	Head  plain
	Inner struct{ X, Y uint32 }
	Tail  [2]plain
}

type leaf struct {
	N    int
	Name string
}

type outer struct {
	ID  int
	Sub struct {
		Count int
		Leaf  leaf
	}
}

// accept returns a test that NewOf[T] succeeds and that New and MakeSlice
// hand out zeroed, aligned values of T.
func accept[T any]() func(*testing.T, *Arena) {
	return func(t *testing.T, a *Arena) {
		o, err := NewOf[T](a)
		if err != nil {
			t.Fatalf("NewOf = %v, want nil", err)
		}
		var zero T
		size, align := unsafe.Sizeof(zero), unsafe.Alignof(zero)
		p, err := o.New()
		if err != nil || p == nil || uintptr(unsafe.Pointer(p))%align != 0 {
			t.Fatalf("New() = %p, %v; want a non-nil pointer aligned to %d", p, err, align)
		}
		if !isZero(unsafe.Pointer(p), size) {
			t.Errorf("New() = %v, want zero", *p)
		}
		s, err := o.MakeSlice(5)
		if err != nil || len(s) != 5 || cap(s) != 5 || uintptr(unsafe.Pointer(unsafe.SliceData(s)))%align != 0 {
			t.Fatalf("MakeSlice(5) = len %d cap %d, %v; want len == cap == 5, aligned to %d", len(s), cap(s), err, align)
		}
		if !isZero(unsafe.Pointer(unsafe.SliceData(s)), 5*size) {
			t.Errorf("MakeSlice(5) = %v, want zeros", s)
		}
		mustCheck(t, a, "New and MakeSlice")
	}
}

// refuse returns a test that NewOf[T] fails with typecheck.ErrPointers and
// names the field path.
func refuse[T any](path string) func(*testing.T, *Arena) {
	return func(t *testing.T, a *Arena) {
		o, err := NewOf[T](a)
		if !errors.Is(err, typecheck.ErrPointers) || !errors.Is(err, ErrPointers) {
			t.Fatalf("NewOf = %v, want %v", err, typecheck.ErrPointers)
		}
		if !strings.Contains(err.Error(), path+" is") {
			t.Errorf("NewOf = %q, want it to name %q", err, path)
		}
		if o != (Of[T]{}) {
			t.Errorf("NewOf returned a usable handle with its error")
		}
	}
}

// isZero reports whether the n bytes at p are all zero.
func isZero(p unsafe.Pointer, n uintptr) bool {
	for _, c := range unsafe.Slice((*byte)(p), n) {
		if c != 0 {
			return false
		}
	}
	return true
}

func TestNewOf(t *testing.T) {
	tests := []struct {
		name string
		test func(*testing.T, *Arena)
	}{
		{"int64", accept[int64]()},
		{"array of uint32", accept[[8]uint32]()},
		{"struct of ints, floats and arrays", accept[plain]()},
		{"nested structs", accept[nested]()},
		{"uintptr", accept[uintptr]()},
		{"empty array of pointers", accept[[0]*int]()},
		{"empty struct", accept[struct{}]()},
		{"complex128", accept[complex128]()},
		{"pointer", refuse[*int]("*int")},
		{"string", refuse[string]("string")},
		{"byte slice", refuse[[]byte]("[]uint8")},
		{"map", refuse[map[int]int]("map[int]int")},
		{"channel", refuse[chan int]("chan int")},
		{"func", refuse[func()]("func()")},
		{"interface", refuse[any]("interface {}")},
		{"unsafe.Pointer", refuse[unsafe.Pointer]("Pointer")},
		{"array of strings", refuse[[3]string]("[3]string[0]")},
		{"string in a nested struct field", refuse[outer]("outer.Sub.Leaf.Name")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.test(t, newArena(t))
		})
	}
}

func TestNewOfNilArena(t *testing.T) {
	if _, err := NewOf[int](nil); err == nil {
		t.Error("NewOf[int](nil) = nil error, want an error")
	}
}

// TestOfZeroes checks that the typed API zeroes memory that Reset gave
// back dirty.
func TestOfZeroes(t *testing.T) {
	a := newArena(t)
	b, err := a.Alloc(4096, 8)
	if err != nil {
		t.Fatalf("Alloc(4096, 8) = %v, want nil", err)
	}
	for i := range b {
		b[i] = 0xff
	}
	a.Reset()
	recs, err := NewOf[plain](a)
	if err != nil {
		t.Fatal(err)
	}
	p, err := recs.New()
	if err != nil || *p != (plain{}) {
		t.Fatalf("New() after Reset = %+v, %v; want zero", p, err)
	}
	s, err := recs.MakeSlice(20)
	if err != nil {
		t.Fatalf("MakeSlice(20) = %v, want nil", err)
	}
	for i, v := range s {
		if v != (plain{}) {
			t.Fatalf("MakeSlice(20)[%d] after Reset = %+v, want zero", i, v)
		}
	}
}

func TestMakeSlice(t *testing.T) {
	a := newArena(t)
	words, err := NewOf[uint64](a)
	if err != nil {
		t.Fatal(err)
	}
	empties, err := NewOf[struct{}](a)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		make    func(n int) (int, int, error) // returns len, cap
		n       int
		wantErr error
	}{
		{"negative", lens(words.MakeSlice), -1, ErrSize},
		{"bytes overflow an int", lens(words.MakeSlice), math.MaxInt/8 + 1, ErrSize},
		{"over the limit", lens(words.MakeSlice), DefaultLimit/8 + 1, ErrExhausted},
		{"empty", lens(words.MakeSlice), 0, nil},
		{"one", lens(words.MakeSlice), 1, nil},
		{"a block's worth", lens(words.MakeSlice), DefaultBlockSize / 8, nil},
		{"many empty structs", lens(empties.MakeSlice), math.MaxInt, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := statsNoResident(a)
			l, c, err := tt.make(tt.n)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("MakeSlice(%d) = %v, want %v", tt.n, err, tt.wantErr)
			}
			if err != nil {
				if after := statsNoResident(a); after != before {
					t.Errorf("failed MakeSlice(%d) changed the stats from %+v to %+v", tt.n, before, after)
				}
			} else if l != tt.n || c != tt.n {
				t.Errorf("MakeSlice(%d) = len %d, cap %d; want %d, %d", tt.n, l, c, tt.n, tt.n)
			}
			mustCheck(t, a, "MakeSlice")
		})
	}
}

// lens adapts a MakeSlice method to report the length and capacity of
// the slice, and whether it is non-nil.
func lens[T any](f func(int) ([]T, error)) func(int) (int, int, error) {
	return func(n int) (int, int, error) {
		s, err := f(n)
		if err == nil && s == nil {
			return -1, -1, nil
		}
		return len(s), cap(s), err
	}
}

// big is larger than the 64 KiB the compiler keeps a temporary on the
// stack for: zeroing one through a temporary would allocate it on the Go
// heap.
type big [128 << 10]byte

// huge is 1 TiB on 64-bit platforms: no arena's default limit holds one.
type huge [1 << (bits.UintSize - 24)]byte

// TestOfBigValue checks that New zeroes a T larger than 64 KiB in place,
// allocating nothing on the Go heap, and hands it out zeroed after Reset.
func TestOfBigValue(t *testing.T) {
	a, err := New(Limit(64 << 20))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	o, err := NewOf[big](a)
	if err != nil {
		t.Fatalf("NewOf[big] = %v, want nil", err)
	}
	n := testing.AllocsPerRun(100, func() {
		v, err := o.New()
		if err != nil {
			panic(err)
		}
		v[0], v[len(v)-1] = 1, 1
	})
	if n != 0 {
		t.Errorf("AllocsPerRun(Of[%d bytes].New) = %v, want 0", len(big{}), n)
	}
	a.Reset()
	v, err := o.New()
	if err != nil || v[0] != 0 || v[len(v)-1] != 0 {
		t.Fatalf("New() after Reset = first byte %d, last %d, %v; want zeroed, nil", v[0], v[len(v)-1], err)
	}
}

// TestNewOfHuge checks that a type larger than the arena's limit is
// refused with an error, not with the process.
func TestNewOfHuge(t *testing.T) {
	if bits.UintSize < 64 {
		t.Skip("1 TiB types need a 64-bit platform")
	}
	o, err := NewOf[huge](newArena(t))
	if !errors.Is(err, ErrSize) {
		t.Fatalf("NewOf[[%d]byte] = %v, want %v", unsafe.Sizeof(huge{}), err, ErrSize)
	}
	if o != (Of[huge]{}) {
		t.Errorf("NewOf[[%d]byte] returned a usable handle with its error", unsafe.Sizeof(huge{}))
	}
}
