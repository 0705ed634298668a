package summary

import (
	"errors"
	"slices"
	"strconv"

	"github.com/carvelab/carve/internal/text"
)

// Go names. A Go execution trace labels an object with the type of its
// elements: a []byte's backing array has the label uint8 (AttrSize 1), a
// []int64's int64, and the event's size is the object's (its span's size
// class). An object whose slot holds two or more elements of its type is
// a slice of it, and a Go programmer calls it so.

// GoName returns the label's name as a Go programmer writes the type of
// its objects: "[]byte" for a uint8 label whose largest object holds two
// or more of its elements (MaxSize >= 2 × Size, Size > 0), "[]T" for
// another element type T likewise ("[]int64"), and Name otherwise.
func (l LabelStat) GoName() string {
	if l.Size <= 0 || l.MaxSize < 2*uint64(l.Size) || l.Name == "" {
		return l.Name
	}
	if l.Name == "uint8" {
		return "[]byte"
	}
	return "[]" + l.Name
}

// byteNames are the names a []byte's label is asked for by.
var byteNames = []string{"[]byte", "[]uint8", "uint8"}

// ErrNoLabel is wrapped by FindLabel's error for a name no label of the
// trace has.
var ErrNoLabel = errors.New("trace: no such type")

// LabelError is FindLabel's error: a name no label of the trace has, and
// the trace's names nearest to it.
type LabelError struct {
	Name string
	// In names the trace ("" reads "the trace"): a caller that knows its
	// name sets it.
	In string
	// Near are the Go names of the trace's labels closest to Name.
	Near []string
}

// Error says it in one line: `no type "main.Entyr" in go.trace; did you
// mean main.Entry?`.
func (e *LabelError) Error() string {
	in := e.In
	if in == "" {
		in = "the trace"
	}
	msg := "no type " + strconv.Quote(e.Name) + " in " + in
	if len(e.Near) == 0 {
		return msg + " (carve stats lists its types)"
	}
	return msg + "; did you mean " + text.Or(e.Near) + "?"
}

func (e *LabelError) Unwrap() error { return ErrNoLabel }

// FindLabel returns the label of stats (a Trace's Labels) that name
// names: its Go name (GoName) or its raw name, and for a []byte's label
// any of "[]byte", "[]uint8" and "uint8". The []byte's label wins, then a
// Go name, then a raw name: "[]uint8" is the []byte's label even where
// the trace also has a label named "[]uint8" (the slice headers of a
// [][]byte, which hold pointers).
// A name no label has is a *LabelError (wrapping ErrNoLabel) with the Go
// names of the trace's labels closest to it.
func FindLabel(stats []LabelStat, name string) (LabelStat, error) {
	for _, s := range stats {
		if s.Name == "uint8" && slices.Contains(byteNames, name) {
			return s, nil
		}
	}
	for _, s := range stats {
		if s.Name != "" && s.GoName() == name {
			return s, nil
		}
	}
	for _, s := range stats {
		if s.Name != "" && s.Name == name {
			return s, nil
		}
	}
	var names []string
	for _, s := range stats {
		if s.Name != "" && !slices.Contains(names, s.GoName()) {
			names = append(names, s.GoName())
		}
	}
	return LabelStat{}, &LabelError{Name: name, Near: text.Closest(name, names, 3)}
}
