package typecheck

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

type inner struct {
	N    int
	Name string
}

type outer struct {
	ID    uint64
	Inner inner
}

type flat struct {
	A int64
	B [4]float32
	C struct{ X, Y uintptr }
	D [0]*int
}

func TestPointerFree(t *testing.T) {
	tests := []struct {
		name string
		typ  reflect.Type
		want string // "" when the type is accepted, else a part of the message
	}{
		{"int64", reflect.TypeFor[int64](), ""},
		{"flat struct", reflect.TypeFor[flat](), ""},
		{"empty struct", reflect.TypeFor[struct{}](), ""},
		{"uintptr", reflect.TypeFor[uintptr](), ""},
		{"pointer", reflect.TypeFor[*int](), "*int is a pointer (*int)"},
		{"unsafe.Pointer", reflect.TypeFor[unsafe.Pointer](), "a pointer"},
		{"string", reflect.TypeFor[string](), "string is a string"},
		{"slice", reflect.TypeFor[[]byte](), "a slice"},
		{"map", reflect.TypeFor[map[int]int](), "a map"},
		{"chan", reflect.TypeFor[chan int](), "a chan"},
		{"func", reflect.TypeFor[func()](), "a func"},
		{"interface", reflect.TypeFor[error](), "an interface"},
		{"nested field", reflect.TypeFor[outer](), "outer.Inner.Name is a string"},
		{"array element", reflect.TypeFor[[3]*int](), "[3]*int[0] is a pointer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := PointerFree(tt.typ)
			if tt.want == "" {
				if err != nil {
					t.Errorf("PointerFree(%v) = %v, want nil", tt.typ, err)
				}
				return
			}
			if !errors.Is(err, ErrPointers) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("PointerFree(%v) = %v, want ErrPointers naming %q", tt.typ, err, tt.want)
			}
		})
	}
}

// TestClear checks that Clear zeroes exactly one value, small or large,
// and nothing beside it.
func TestClear(t *testing.T) {
	t.Run("small", func(t *testing.T) { testClear[[3]uint64](t) })
	t.Run("at the threshold", func(t *testing.T) { testClear[[smallValue]byte](t) })
	t.Run("large", func(t *testing.T) { testClear[[smallValue + 1]byte](t) })
	t.Run("128 KiB", func(t *testing.T) { testClear[[128 << 10]byte](t) })
}

func testClear[T any](t *testing.T) {
	var vs [3]T
	b := unsafe.Slice((*byte)(unsafe.Pointer(&vs)), unsafe.Sizeof(vs))
	for i := range b {
		b[i] = 0xa5
	}
	Clear(&vs[1])
	n := int(unsafe.Sizeof(vs[0]))
	for i, c := range b {
		want := byte(0xa5)
		if i >= n && i < 2*n {
			want = 0
		}
		if c != want {
			t.Fatalf("Clear of a %d-byte value: byte %d of three values = %#x, want %#x", n, i, c, want)
		}
	}
}
