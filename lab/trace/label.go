package trace

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// A Label says what an object is: for a Go execution trace, the object's
// type. It is a name and attributes, which carve's readers set for their
// formats (see AttrSize and AttrPtrBytes); the native format carries any.
type Label struct {
	Name string
	// Attrs are the label's attributes, sorted by key, each key once.
	Attrs []Attr
}

// Attr is one attribute of a Label: a key and its value.
type Attr struct{ Key, Value string }

// The attributes the Go importer sets on a type's label.
const (
	// AttrSize is the type's size in bytes (a []byte's objects have the
	// type uint8: size 1; the object's own size is the event's).
	AttrSize = "size"
	// AttrPtrBytes is how many leading bytes of the type may hold
	// pointers: 0 for a pointer-free type, whose objects the GC does
	// not scan and carve's pools may hold.
	AttrPtrBytes = "ptrbytes"
	// AttrSite is where in the program the objects of the label were
	// allocated: "function (file.go:line)", the innermost frame of the
	// program's own code (see package record's sites). A type allocated
	// at several sites has a label per site, each named as the type.
	AttrSite = "site"
	// AttrSiteByShare is "1" on a label whose objects' site was drawn by
	// share: their size has several sites, each object given one in
	// proportion to the sites' allocations of that size.
	AttrSiteByShare = "siteshare"
)

// AtSite reports whether site, as a label gives it ("main.(*Cache).Set
// (cache.go:88)"), is one pattern names: a part of it, a function or a
// file and line, a method's receiver written with or without its
// pointer ("Cache.Set" or "(*Cache).Set").
func AtSite(site, pattern string) bool {
	return pattern != "" && (strings.Contains(site, pattern) || strings.Contains(receivers.Replace(site), pattern))
}

// receivers writes a method's receiver as a plain type: (*Cache).Set is
// Cache.Set.
var receivers = strings.NewReplacer("(*", "", ").", ".")

// MovedAt names, among the labels a what-if moves (MovedBy), the
// objects of the type named typ ("" for any) allocated at the sites
// pattern names (AtSite).
func MovedAt(typ, pattern string) string { return "type=" + typ + ",site=" + pattern }

// MovedBy reports whether the objects of label l are among those moved
// names: a label's name, or MovedAt's name of a type and sites.
func MovedBy(l Label, moved []string) bool {
	for _, m := range moved {
		rest, bySite := strings.CutPrefix(m, "type=")
		if !bySite {
			if m == l.Name {
				return true
			}
			continue
		}
		typ, pattern, _ := strings.Cut(rest, ",site=")
		site, _ := l.Attr(AttrSite)
		if (typ == "" || typ == l.Name) && AtSite(site, pattern) {
			return true
		}
	}
	return false
}

// Attr returns the value of the attribute key.
func (l Label) Attr(key string) (string, bool) {
	i, ok := slices.BinarySearchFunc(l.Attrs, key, func(a Attr, k string) int { return strings.Compare(a.Key, k) })
	if !ok {
		return "", false
	}
	return l.Attrs[i].Value, true
}

// Uint returns the attribute key as a decimal number; ok is false when it
// is absent or not one.
func (l Label) Uint(key string) (v uint64, ok bool) {
	s, ok := l.Attr(key)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}

// String formats l as the native format's definition does, without the
// label's number: `main.session ptrbytes=0 size=64`.
func (l Label) String() string {
	b := appendWord(nil, l.Name)
	for _, a := range l.Attrs {
		b = append(b, ' ')
		b = append(b, a.Key...)
		b = append(b, '=')
		b = appendWord(b, a.Value)
	}
	return string(b)
}

// MaxLabelBytes bounds the memory of a label table: past it, Intern
// fails (and a Reader stops with its error) rather than grow without
// bound on a hostile trace. A label costs its key (its name, keys and
// values, each with its length in decimal and a colon), an eighth more
// for the allocator's rounding, 32 bytes an attribute, and LabelCost
// bytes for its entries in the table's list and index and in a native
// Reader's numbering of the trace's labels: measured, a label of a
// 39-byte name costs the table 131 bytes of Go heap, and counts 175, so
// that 191,739 of them fill it. A Go program has some thousands of types
// (a few hundred KB). A summary (package summary) keeps 96 bytes a label
// of its trace more (its LabelStat), and 72 while it reads the trace: at
// most 41 MiB.
//
// MaxLabels is the highest label number a native trace may define: no
// table holds more labels (MaxLabelBytes holds 256,140 of a one-byte name
// and no attribute).
const (
	MaxLabelBytes = 32 << 20
	LabelCost     = 128
	MaxLabels     = 1 << 18
)

// ErrTooManyLabels is returned (wrapped) when a label table would pass
// MaxLabelBytes.
var ErrTooManyLabels = errors.New("trace: too many labels")

// Labels is a table of interned labels: each distinct label once, numbered
// 1, 2, 3... in the order it was first interned. 0 is no label, and the
// Label field of an Event is a number in its trace's table.
//
// A Reader's table grows as the trace is read (a label is in it before
// the first event that carries it is returned). Labels is not safe for
// concurrent use while it grows; a table that no longer does may be read
// by any number of goroutines.
type Labels struct {
	// pages[i][j] is label i*labelPage+j+1: a table grown a page at a
	// time never copies its labels, and holds at most one page unused.
	pages [][]Label
	n     int
	index map[string]uint32 // labelKey(label) -> its number
	bytes int               // the table's cost, as MaxLabelBytes counts it
}

// labelPage is how many labels a page of a table holds.
const labelPage = 256

// Len returns the number of labels in t; a nil table has none.
func (t *Labels) Len() int {
	if t == nil {
		return 0
	}
	return t.n
}

// Bytes returns what t costs, as MaxLabelBytes counts it.
func (t *Labels) Bytes() int {
	if t == nil {
		return 0
	}
	return t.bytes
}

// Label returns label number id; ok is false for 0 and for numbers past
// the table's end.
func (t *Labels) Label(id uint32) (l Label, ok bool) {
	if t == nil || id == 0 || int64(id) > int64(t.n) {
		return Label{}, false
	}
	i := int(id - 1)
	return t.pages[i/labelPage][i%labelPage], true
}

// Name returns the name of label id, or "" when there is none.
func (t *Labels) Name(id uint32) string {
	l, _ := t.Label(id)
	return l.Name
}

// Intern returns the number of l in t, adding it if it is new. Its
// attributes are sorted by key (a copy is kept; l is not changed); a key
// given twice, a key that is empty or holds other bytes than letters,
// digits and "_.-", or a table full (ErrTooManyLabels), is an error.
func (t *Labels) Intern(l Label) (uint32, error) {
	attrs := slices.Clone(l.Attrs)
	slices.SortFunc(attrs, func(a, b Attr) int { return strings.Compare(a.Key, b.Key) })
	for i, a := range attrs {
		if !validKey(a.Key) {
			return 0, fmt.Errorf("trace: label %q: attribute key %q: want letters, digits, '_', '.' or '-'", l.Name, a.Key)
		}
		if i > 0 && attrs[i-1].Key == a.Key {
			return 0, fmt.Errorf("trace: label %q: attribute %q given twice", l.Name, a.Key)
		}
	}
	l.Attrs = attrs
	key := labelKey(l)
	if id, ok := t.index[key]; ok {
		return id, nil
	}
	cost := labelBytes(len(key), len(attrs))
	if t.bytes+cost > MaxLabelBytes {
		return 0, fmt.Errorf("%w: %d labels fill the label table's bound of %d MiB of memory (a label counts its name and attributes and %d bytes)",
			ErrTooManyLabels, t.n, MaxLabelBytes>>20, LabelCost)
	}
	if t.index == nil {
		t.index = make(map[string]uint32)
	}
	// The label's strings are the key's bytes: one allocation a label.
	l = keyLabel(key, l)
	if t.n%labelPage == 0 {
		t.pages = append(t.pages, make([]Label, 0, labelPage))
	}
	last := len(t.pages) - 1
	t.pages[last] = append(t.pages[last], l)
	t.n++
	t.bytes += cost
	id := uint32(t.n)
	t.index[key] = id
	return id, nil
}

// labelBytes is what a label of a key of n bytes and of attrs attributes
// costs, as MaxLabelBytes counts it.
func labelBytes(n, attrs int) int {
	return n + n/8 + 32*attrs + LabelCost
}

// labelKey encodes a label whose attributes are sorted, each string
// prefixed by its length, so that distinct labels have distinct keys.
func labelKey(l Label) string {
	n := 8 + len(l.Name)
	for _, a := range l.Attrs {
		n += 16 + len(a.Key) + len(a.Value)
	}
	b := make([]byte, 0, n)
	put := func(s string) {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
	}
	put(l.Name)
	for _, a := range l.Attrs {
		put(a.Key)
		put(a.Value)
	}
	return string(b)
}

// keyLabel returns l with its strings cut from key, labelKey(l), which
// holds them all: the label then keeps no bytes of its own.
func keyLabel(key string, l Label) Label {
	i := 0
	next := func(s string) string {
		i += len(strconv.Itoa(len(s))) + 1
		w := key[i : i+len(s)]
		i += len(s)
		return w
	}
	l.Name = next(l.Name)
	for j := range l.Attrs {
		l.Attrs[j] = Attr{next(l.Attrs[j].Key), next(l.Attrs[j].Value)}
	}
	if len(l.Attrs) == 0 {
		l.Attrs = nil
	}
	return l
}

// validKey reports whether k may be an attribute key: one or more
// letters, digits, '_', '.' or '-'.
func validKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// A LabeledSource is a Source whose events carry labels: Labels returns
// the table that their Label fields number. The table may grow as the
// source is read; a label is in it before the first event that carries
// it is returned. A *Reader is one (its table is nil for the formats
// that have no labels).
type LabeledSource interface {
	Source
	Labels() *Labels
}

// LabelsOf returns the label table of src's events, or nil when they
// carry none.
func LabelsOf(src Source) *Labels {
	if l, ok := src.(LabeledSource); ok {
		return l.Labels()
	}
	return nil
}

// LabeledEvents returns a Source that gives evs, sharing them, whose
// labels are numbers in labels (see Events).
func LabeledEvents(evs []Event, labels *Labels) Source {
	return &labeledSlice{sliceSource{evs: evs}, labels}
}

type labeledSlice struct {
	sliceSource
	labels *Labels
}

func (s *labeledSlice) Labels() *Labels { return s.labels }
