package arena

import (
	"errors"
	"math"
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
