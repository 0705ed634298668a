package trace

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

func TestLabels(t *testing.T) {
	var tab Labels
	a, err := tab.Intern(Label{Name: "main.session", Attrs: []Attr{{"size", "64"}, {"ptrbytes", "0"}}})
	if err != nil || a != 1 {
		t.Fatalf("Intern = %d, %v; want 1", a, err)
	}
	// The same label, attributes in another order: the same number.
	if b, err := tab.Intern(Label{Name: "main.session", Attrs: []Attr{{"ptrbytes", "0"}, {"size", "64"}}}); b != a || err != nil {
		t.Errorf("Intern of the same label = %d, %v; want %d", b, err, a)
	}
	// Another size: another label, though the name is the same.
	if b, _ := tab.Intern(Label{Name: "main.session", Attrs: []Attr{{"size", "32"}}}); b != 2 {
		t.Errorf("Intern of another label = %d, want 2", b)
	}
	if c, _ := tab.Intern(Label{Name: "x"}); c != 3 || tab.Len() != 3 {
		t.Errorf("Intern(x) = %d, Len %d; want 3, 3", c, tab.Len())
	}
	l, ok := tab.Label(1)
	if !ok || l.Name != "main.session" || !reflect.DeepEqual(l.Attrs, []Attr{{"ptrbytes", "0"}, {"size", "64"}}) {
		t.Errorf("Label(1) = %+v, %v", l, ok)
	}
	if v, ok := l.Uint(AttrSize); v != 64 || !ok {
		t.Errorf("Uint(size) = %d, %v", v, ok)
	}
	if _, ok := l.Uint("nosuch"); ok {
		t.Error("Uint of a missing attribute: ok")
	}
	for _, id := range []uint32{0, 4} {
		if _, ok := tab.Label(id); ok {
			t.Errorf("Label(%d): ok", id)
		}
	}
	var none *Labels
	if none.Len() != 0 || none.Name(1) != "" {
		t.Error("a nil table is not empty")
	}
	for _, bad := range []Label{
		{Name: "k", Attrs: []Attr{{"", "v"}}},
		{Name: "k", Attrs: []Attr{{"a b", "v"}}},
		{Name: "k", Attrs: []Attr{{"a=", "v"}}},
		{Name: "k", Attrs: []Attr{{"a", "1"}, {"a", "2"}}},
	} {
		if _, err := tab.Intern(bad); err == nil {
			t.Errorf("Intern(%+v) = nil error", bad)
		}
	}
	if got := (Label{Name: "a b", Attrs: []Attr{{"k", `"q"`}, {"n", ""}}}).String(); got != `"a b" k="\"q\"" n=""` {
		t.Errorf("String() = %s", got)
	}
}

func TestLabelsBounded(t *testing.T) {
	var tab Labels
	long := strings.Repeat("x", MaxLabelBytes/2)
	if _, err := tab.Intern(Label{Name: long}); err != nil {
		t.Fatal(err)
	}
	if _, err := tab.Intern(Label{Name: long + "y"}); !errors.Is(err, ErrTooManyLabels) {
		t.Errorf("Intern past MaxLabelBytes = %v, want ErrTooManyLabels", err)
	}
	// A label already in the table costs nothing more.
	if _, err := tab.Intern(Label{Name: long}); err != nil {
		t.Errorf("Intern of a label in a full table = %v", err)
	}
}

// labelBomb returns a native trace of n labels of names of 39 bytes, each
// used by one allocation, made as it is read.
func labelBomb(n int) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		w := bufio.NewWriter(pw)
		fmt.Fprintln(w, nativeHeaderV2)
		for i := 1; i <= n; i++ {
			fmt.Fprintf(w, "l %d main.type_%029d\na %d 16 @%d\n", i, i, i, i)
		}
		w.Flush()
		pw.Close()
	}()
	return pr
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestLabelBomb: 2^20 labels of 39-byte names, each used once. The
// reader stops at MaxLabelBytes, its error says so, and what the table
// holds then is at most what it counted, and within MaxLabelBytes.
func TestLabelBomb(t *testing.T) {
	before := heapInUse()
	r, err := NewReader(labelBomb(1<<20), "bomb", Native)
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = r.Next()
	}
	if !errors.Is(err, ErrTooManyLabels) {
		t.Fatalf("reading the bomb: %v, want ErrTooManyLabels", err)
	}
	if want := fmt.Sprintf("bound of %d MiB", MaxLabelBytes>>20); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	used := heapInUse() - before
	n, counted := r.Labels().Len(), r.Labels().Bytes()
	t.Logf("%d labels: %d bytes of Go heap (%d a label), %d counted; the error: %v", n, used, int(used)/n, counted, err)
	if int(used) > counted || counted > MaxLabelBytes {
		t.Errorf("%d labels hold %d bytes, counted %d, bound %d", n, used, counted, MaxLabelBytes)
	}
	if counted < MaxLabelBytes-LabelCost-64 {
		t.Errorf("the table stopped at %d bytes, short of its bound %d", counted, MaxLabelBytes)
	}
	runtime.KeepAlive(r)
}

// TestNativeV2Errors: the lines of version 2, malformed, and version 2's
// lines in a trace of version 1.
// syntaxCase is a malformed trace: its text, and the line, the kind of
// line and (a part of) what the *Error says was expected.
type syntaxCase struct {
	name, text string
	line       int64
	what, want string
}

// checkSyntaxErrors reads each case's text as a native trace named
// t.trace and checks the *Error it fails with.
func checkSyntaxErrors(t *testing.T, tests []syntaxCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := readString("t.trace", tt.text, Native)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want an *Error", err)
			}
			if e.File != "t.trace" || e.Line != tt.line || e.What != tt.what || !strings.Contains(e.Want, tt.want) {
				t.Errorf("err = %+v, want line %d, what %q, want containing %q", *e, tt.line, tt.what, tt.want)
			}
		})
	}
}

func TestNativeV2Errors(t *testing.T) {
	const h, v3 = "# carve trace v2\n", "# carve trace v3\n"
	tests := []syntaxCase{
		{"v4", "# carve trace v4\n", 1, "header", "v2\" or \"# carve trace v3"},
		{"label in v1", "# carve trace v1\nl 1 x\n", 2, "line", `"a", "f"`},
		{"use in v1", "# carve trace v1\na 1 2 @1\n", 2, "alloc", "a <id> <size> [<align>]\""},
		{"undefined", h + "a 1 2 @1\n", 2, "alloc", "defined before"},
		{"defined twice", h + "l 1 x\nl 1 y\n", 3, "label", "defined once"},
		{"label 0", h + "l 0 x\n", 2, "label", "from 1 to"},
		{"no name", h + "l 1\n", 2, "label", "l <label> <name>"},
		{"bad quote", h + "l 1 \"x\n", 2, "label", "l <label> <name>"},
		{"bad key", h + "l 1 x =v\n", 2, "label", "keys"},
		{"no value", h + "l 1 x k\n", 2, "label", "keys"},
		{"two labels", h + "l 1 x\na 1 2 @1 @1\n", 3, "alloc", "[@<label>]"},
		{"label, then align", h + "l 1 x\na 1 2 @1 8\n", 3, "alloc", "[@<label>]"},
		{"label on calloc, bad", h + "c 1 2 3 @\n", 2, "calloc", "[@<label>]"},
		{"go heap", h + "g 1\n", 2, "go heap", "g <heap objects bytes>"},
		{"go heap in v1", "# carve trace v1\ng 1 2\n", 2, "line", `"a", "f"`},
		{"collection in v2", h + "a 1 2\nG 0 1 2 4\n", 3, "line", `"l" or "g"`},
		{"collection, a field missing", v3 + "a 1 2\nG 0 1 2\n", 3, "collection", "G <mark start> <mark end> <marked bytes> <goal bytes>"},
		{"collection, a word", v3 + "a 1 2\nG 0 1 x 4\n", 3, "collection", "G <mark start>"},
		{"collection ending before it starts", v3 + "a 1 2\na 2 2\nG 2 1 2 4\n", 4, "collection", "starts at or before its end"},
		{"collection past the events", v3 + "a 1 2\nG 0 2 2 4\n", 3, "collection", "by the 1 events read so far"},
		{"collections out of order", v3 + "a 1 2\na 2 2\nG 0 2 2 4\nG 0 1 2 4\n", 5, "collection", "at or after the last one's"},
		{"bad line in v3", v3 + "x 1\n", 2, "line", `"g", "G" or "R"`},
	}
	checkSyntaxErrors(t, tests)
}

// TestWriterLabels: a Writer writes version 1 without a table, version 2
// with one, defines each label once before its first use, and refuses
// labels it cannot write.
func TestWriterLabels(t *testing.T) {
	e := Event{Op: Alloc, ID: 1, Size: 64, Label: 1}
	var buf bytes.Buffer
	w := NewWriter(&buf)
	if err := w.Write(e); err == nil || !strings.Contains(err.Error(), "SetLabels") {
		t.Errorf("Write of a label without a table = %v", err)
	}
	w.Write(Event{Op: Alloc, ID: 1, Size: 64})
	w.Flush()
	if !strings.HasPrefix(buf.String(), "# carve trace v1\n") {
		t.Errorf("without labels: %q, want version 1", buf.String())
	}
	if err := w.SetLabels(&Labels{}); err == nil {
		t.Error("SetLabels after the header = nil error")
	}

	var tab Labels
	tab.Intern(Label{Name: "main.session", Attrs: []Attr{{"size", "64"}}})
	buf.Reset()
	w = NewWriter(&buf)
	if err := w.SetLabels(&tab); err != nil {
		t.Fatal(err)
	}
	for _, e := range []Event{e, {Op: Alloc, ID: 2, Size: 64, Label: 1}, {Op: Free, ID: 1}} {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Write(Event{Op: Alloc, ID: 3, Size: 1, Label: 2}); err == nil || !strings.Contains(err.Error(), "not in the table") {
		t.Errorf("Write of a label not in the table = %v", err)
	}
	if err := w.Write(Event{Op: Free, ID: 2, Label: 1}); err == nil {
		t.Error("Write of a labelled free = nil error")
	}
	w.Flush()
	want := "# carve trace v3\nl 1 main.session size=64\na 1 64 @1\na 2 64 @1\nf 1\n"
	if buf.String() != want {
		t.Errorf("written:\n%s\nwant:\n%s", buf.String(), want)
	}
	r, err := NewReader(&buf, "w", Auto)
	if err != nil {
		t.Fatal(err)
	}
	if r.Labels() == nil {
		t.Fatal("a v2 trace's Reader has no label table before the first read")
	}
	evs := readAll(t, r)
	if len(evs) != 3 || evs[0].Label != 1 || r.Labels().Name(1) != "main.session" {
		t.Errorf("read back %v, labels %d", evs, r.Labels().Len())
	}
	if LabelsOf(r) != r.Labels() || LabelsOf(Events(evs)) != nil || LabelsOf(LabeledEvents(evs, &tab)) != &tab {
		t.Error("LabelsOf does not find the tables")
	}
}
