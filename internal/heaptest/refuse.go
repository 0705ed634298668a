package heaptest

import (
	"errors"
	"reflect"
	"testing"
)

// Refuser is what Refused calls.
type Refuser interface {
	Free(b []byte) error
	Realloc(b []byte, size int) ([]byte, error)
	UsableSize(b []byte) (int, error)
}

// Refused checks that Free, Realloc (to size bytes) and UsableSize all
// refuse b with one of the errors want (errors.Is), and that the
// statistics stats returns are the same after as before. probe names the
// case for the errors.
func Refused(t testing.TB, h Refuser, b []byte, size int, want []error, stats func() any, probe int) {
	t.Helper()
	is := func(err error) bool {
		for _, w := range want {
			if errors.Is(err, w) {
				return true
			}
		}
		return false
	}
	before := stats()
	if err := h.Free(b); !is(err) {
		t.Fatalf("Free(%#x) (probe %d) = %v, want one of %v", Addr(b), probe, err, want)
	}
	if got, err := h.Realloc(b, size); got != nil || !is(err) {
		t.Fatalf("Realloc(%#x, %d) (probe %d) = %#x, %v, want nil, one of %v", Addr(b), size, probe, Addr(got), err, want)
	}
	if n, err := h.UsableSize(b); n != 0 || !is(err) {
		t.Fatalf("UsableSize(%#x) (probe %d) = %d, %v, want 0, one of %v", Addr(b), probe, n, err, want)
	}
	if after := stats(); !reflect.DeepEqual(after, before) {
		t.Fatalf("Stats() after refused calls (probe %d) = %+v, want unchanged %+v", probe, after, before)
	}
}
