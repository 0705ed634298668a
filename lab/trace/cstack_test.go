package trace

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// fakeSymbols names addresses from a table: module path and ELF address
// (pc - Base) to frames.
type fakeSymbols map[string]map[uint64][]Frame

func (f fakeSymbols) Frames(m Module, pc uint64) []Frame { return f[m.Path][pc-m.Base] }

// TestAOSPStacks reads carve's recorder's stack records: each
// allocation is labelled with the site of its stack's innermost return
// address, named by the Symbolizer, or by module and offset; a realloc
// at another site gives its object that site.
func TestAOSPStacks(t *testing.T) {
	const log = `module 0x555500000000 0x555500001000 0x555500009000 /bin/prog
module 0x7f0000000000 0x7f0000000000 0x7f0000100000 /lib/libc.so.6
stack 1 0x555500001235 0x555500002000
stack 2 0x555500003011
stack 3 0x7f0000000500 0x555500001235
stack 4 0x9000
1: malloc 0x1000 100 @1
1: malloc 0x2000 50 @2
1: calloc 0x3000 4 8 @3
1: malloc 0x4000 10 @4
1: realloc 0x5000 0x2000 300 @1
1: realloc 0x6000 0x0 7 @2
1: malloc 0x7000 5
1: free 0x1000
`
	sym := fakeSymbols{"/bin/prog": {
		0x1234: {{"make_node", "/src/prog.c", 12}, {"main", "/src/prog.c", 40}},
		0x3010: {{"make_name", "", 0}},
	}}
	r, err := NewReaderOptions(strings.NewReader(log), "log", ReaderOptions{Format: AOSP, Symbolizer: sym})
	if err != nil {
		t.Fatal(err)
	}
	evs := readAll(t, r)
	site := func(l uint32) string {
		lab, ok := r.Labels().Label(l)
		if !ok {
			return "(none)"
		}
		s, _ := lab.Attr(AttrSite)
		return s
	}
	want := []struct {
		op   Op
		site string
	}{
		{Alloc, "make_node (prog.c:12)"},
		{Alloc, "make_name (prog)"},
		{Calloc, "libc.so.6+0x500"},
		{Alloc, "0x9000"},
		{Realloc, "make_node (prog.c:12)"},
		{Alloc, "make_name (prog)"},
		{Alloc, "(none)"},
		{Free, "(none)"},
	}
	if len(evs) != len(want) {
		t.Fatalf("%d events, want %d: %v", len(evs), len(want), evs)
	}
	for i, w := range want {
		if evs[i].Op != w.op || site(evs[i].Label) != w.site {
			t.Errorf("event %d: %v at %q, want %v at %q", i, evs[i], site(evs[i].Label), w.op, w.site)
		}
	}

}

// TestAOSPStackErrors: a record naming a stack not defined, and
// malformed stack and module lines, are errors that name the line.
func TestAOSPStackErrors(t *testing.T) {
	for _, c := range []struct{ name, log, want string }{
		{"undefined", "1: malloc 0x10 8 @7\n", `log:1: malloc: want a stack defined before by a "stack" line`},
		{"undefined realloc", "stack 1 0x10\n1: realloc 0x10 0x0 8 @2\n", `log:2: realloc: want a stack defined before`},
		{"stack syntax", "stack x 0x10\n", `log:1: stack: want "stack <id>`},
		{"stack address", "stack 1 zz\n", `log:1: stack: want`},
		{"module range", "module 0x0 0x2000 0x1000 /bin/x\n", `log:1: module: want`},
		{"module path", "module 0x0 0x1000 0x2000\n", `log:1: module: want`},
		{"trailing", "stack 1 0x10\n1: malloc 0x10 8 @1 9\n", `log:2: malloc: want`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := NewReader(strings.NewReader(c.log), "log", AOSP)
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.Read(make([]Event, 8))
			var e *Error
			if !errors.As(err, &e) || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("err = %v, want one starting %q", err, c.want)
			}
		})
	}
}

// TestAOSPStacksDetected: a log that starts with carve's module and
// stack lines is detected as AOSP.
func TestAOSPStacksDetected(t *testing.T) {
	log := strings.Repeat("module 0x0 0x1000 0x2000 /lib/x.so\n", 100) + "stack 1 0x1010\n1: malloc 0x10 8 @1\n"
	r, err := NewReader(strings.NewReader(log), "log", Auto)
	if err != nil {
		t.Fatal(err)
	}
	if r.Format() != AOSP {
		t.Errorf("detected %v, want AOSP", r.Format())
	}
}

// TestReallocLabelRoundTrip: a Realloc's label is written and read
// back by the native format.
func TestReallocLabelRoundTrip(t *testing.T) {
	labels := &Labels{}
	a, _ := labels.Intern(Label{Attrs: []Attr{{AttrSite, "f (a.c:1)"}}})
	b, _ := labels.Intern(Label{Attrs: []Attr{{AttrSite, "g (a.c:2)"}}})
	evs := []Event{{Op: Alloc, ID: 1, Size: 8, Label: a}, {Op: Realloc, ID: 1, Size: 16, Label: b}, {Op: Realloc, ID: 1, Size: 32}, {Op: Free, ID: 1}}
	out := writeLabelled(t, labels, evs)
	w := NewWriter(io.Discard)
	if err := w.SetLabels(labels); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(Event{Op: Free, ID: 1, Label: a}); err == nil {
		t.Error("a Free with a label was written")
	}
	r, err := NewReader(bytes.NewReader(out.Bytes()), "t", Native)
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, r)
	if len(got) != len(evs) || got[1].Label == 0 || got[2].Label != 0 {
		t.Fatalf("read back %v from\n%s", got, out.String())
	}
	if l, _ := r.Labels().Label(got[1].Label); l.Attrs[0].Value != "g (a.c:2)" {
		t.Errorf("the realloc's label reads back as %v", l)
	}
}
