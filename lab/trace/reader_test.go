package trace

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
)

// readString reads a whole trace given as text.
func readString(name, text string, f Format) ([]Event, *Reader, error) {
	r, err := NewReader(strings.NewReader(text), name, f)
	if err != nil {
		return nil, nil, err
	}
	var evs []Event
	for {
		e, err := r.Next()
		if err == io.EOF {
			return evs, r, nil
		}
		if err != nil {
			return evs, r, err
		}
		evs = append(evs, e)
	}
}

// TestErrors checks that every importer stops at a malformed line with an
// *Error that names the file, the line, what the line was taken for and
// the syntax it wants.
func TestErrors(t *testing.T) {
	tests := []struct {
		name   string
		format Format
		text   string
		line   int64
		what   string
		want   string // in Error.Want
		got    string // Error.Got
	}{
		{"native/header", Native, "a 1 2\n", 1, "header", "# carve trace v1", "a 1 2"},
		{"native/no header", Native, "", 0, "header", "# carve trace v1", "end of file"},
		{"native/op", Native, "# carve trace v1\nx 1 2\n", 2, "line", `"a", "f"`, "x 1 2"},
		{"native/alloc", Native, "# carve trace v1\na 1\n", 2, "alloc", "a <id> <size>", "a 1"},
		{"native/alloc align", Native, "# carve trace v1\na 1 2 3\n", 2, "alloc", "power of two", "a 1 2 3"},
		{"native/free", Native, "# carve trace v1\nf 1 2\n", 2, "free", "f <id>", "f 1 2"},
		{"native/realloc", Native, "# carve trace v1\nr x 2\n", 2, "realloc", "r <id> <size>", "r x 2"},
		{"native/calloc", Native, "# carve trace v1\nc 1 2\n", 2, "calloc", "c <id> <n> <size>", "c 1 2"},
		{"native/calloc overflow", Native, "# carve trace v1\nc 1 4294967296 4294967296\n", 2, "calloc", "below 2^64", "c 1 4294967296 4294967296"},
		{"native/memalign", Native, "# carve trace v1\nm 1 48 2\n", 2, "memalign", "power of two", "m 1 48 2"},
		{"native/thread", Native, "# carve trace v1\nt 4294967296\n", 2, "thread", "t <thread>", "t 4294967296"},
		{"native/overflow", Native, "# carve trace v1\nf 18446744073709551616\n", 2, "free", "f <id>", "f 18446744073709551616"},

		{"rep/header", Rep, "20000\n6\n7\nx\n", 4, "header", "four numbers", "x"},
		{"rep/three numbers", Rep, "20000\n6\n7\na 0 8\n", 4, "header", "got 3 numbers", "a 0 8"},
		{"rep/five numbers", Rep, "1 2 3 4 5\n", 1, "header", "four numbers", "1 2 3 4 5"},
		{"rep/short header", Rep, "20000\n", 0, "header", "<heap size>", "end of file"},
		{"rep/alloc", Rep, "1 2 3 4\na 0\n", 2, "alloc", "a <id> <size>", "a 0"},
		{"rep/realloc", Rep, "1 2 3 4\nr 0 -1\n", 2, "realloc", "r <id> <size>", "r 0 -1"},
		{"rep/free", Rep, "1 2 3 4\nf\n", 2, "free", "f <id>", "f"},
		{"rep/op", Rep, "1 2 3 4\nalloc 0 1\n", 2, "line", "a request", "alloc 0 1"},

		{"valgrind/malloc", Valgrind, "--1-- malloc(16) = 0x\n", 1, "malloc", "malloc(<size>) = <ptr>", "--1-- malloc(16) = 0x"},
		{"valgrind/new", Valgrind, "--1-- _Znwm(sixteen) = 0x10\n", 1, "_Znwm", "malloc(<size>) = <ptr>", "--1-- _Znwm(sixteen) = 0x10"},
		{"valgrind/aligned new", Valgrind, "--1-- _ZnwmSt11align_val_t(size 16, al 0) = 0x10\n", 1, "_ZnwmSt11align_val_t", "(size <size>, al <align>)", "--1-- _ZnwmSt11align_val_t(size 16, al 0) = 0x10"},
		{"valgrind/calloc", Valgrind, "--1-- calloc(3) = 0x10\n", 1, "calloc", "calloc(<n>,<size>) = <ptr>", "--1-- calloc(3) = 0x10"},
		{"valgrind/realloc", Valgrind, "--1-- realloc(0x10) = 0x20\n", 1, "realloc", "realloc(<ptr>,<size>) = <ptr>", "--1-- realloc(0x10) = 0x20"},
		{"valgrind/memalign", Valgrind, "--1-- memalign(64, 100) = 0x40\n", 1, "memalign", "memalign(al <align>, size <size>)", "--1-- memalign(64, 100) = 0x40"},
		{"valgrind/free", Valgrind, "==1== hello\n--1-- free(16)\n", 2, "free", "free(<ptr>)", "--1-- free(16)"},

		{"heaptrack/alloc", Heaptrack, "v 1 3\n+ 10 2\n", 2, "alloc", "+ <size> <trace> <ptr>", "+ 10 2"},
		{"heaptrack/free", Heaptrack, "v 1 3\n- xyz\n", 2, "free", "- <ptr>", "- xyz"},
		{"heaptrack/info", Heaptrack, "v 1 3\na 10\n", 2, "allocation info", "a <size> <trace>", "a 10"},
		{"heaptrack/unknown info", Heaptrack, "v 1 3\na 10 1\n+ 1\n", 3, "alloc", "allocation info defined", "+ 1"},
		{"heaptrack/mixed", Heaptrack, "v 1 3\n+ 10 1 5000\n+ 0\n", 3, "alloc", `as the "+" records before`, "+ 0"},

		{"mtrace/line", Mtrace, "= Start\n@ ./p:[0x1] * 0x10 0x20\n", 2, "line", "[@ <caller>] <op> <ptr> [<size>]", "@ ./p:[0x1] * 0x10 0x20"},
		{"mtrace/ptr", Mtrace, "= Start\n@ [0x1] + 10 0x20\n", 2, "line", "<op> <ptr>", "@ [0x1] + 10 0x20"},
		{"mtrace/no caller", Mtrace, "= Start\nxx + 0x10 0x20\n", 2, "line", "[@ <caller>]", "xx + 0x10 0x20"},
		{"mtrace/realloc", Mtrace, "= Start\n@ [0x1] < 0x10\n@ [0x1] + 0x20 0x8\n", 3, "realloc", "> <ptr> <size>", "@ [0x1] + 0x20 0x8"},
		{"mtrace/realloc end", Mtrace, "= Start\n@ [0x1] < 0x10\n", 0, "realloc", "> <ptr> <size>", "end of file"},
		{"mtrace/lone >", Mtrace, "= Start\n@ [0x1] > 0x10 0x8\n", 2, "realloc", "< <ptr>", "@ [0x1] > 0x10 0x8"},

		{"aosp/line", AOSP, "202 malloc 0x10 16\n", 1, "line", "<tid>: <action> <ptr> [<args>]", "202 malloc 0x10 16"},
		{"aosp/action", AOSP, "202: mallocx 0x10 16\n", 1, "line", "an action malloc", "202: mallocx 0x10 16"},
		{"aosp/malloc", AOSP, "202: malloc 0xb4827400\n", 1, "malloc", "<tid>: malloc <ptr> <size>", "202: malloc 0xb4827400"},
		{"aosp/malloc times", AOSP, "202: malloc 0xb4827400 16 1000\n", 1, "malloc", "[<start ns> <end ns>]", "202: malloc 0xb4827400 16 1000"},
		{"aosp/calloc", AOSP, "202: calloc 0x10 16\n", 1, "calloc", "<tid>: calloc <ptr> <nmemb> <size>", "202: calloc 0x10 16"},
		{"aosp/memalign", AOSP, "202: memalign 0x10 4294967296 16\n", 1, "memalign", "alignment up to 2^31", "202: memalign 0x10 4294967296 16"},
		{"aosp/realloc", AOSP, "202: realloc 0x10 16\n", 1, "realloc", "<tid>: realloc <new ptr> <old ptr> <size>", "202: realloc 0x10 16"},
		{"aosp/free", AOSP, "1: malloc 0x10 16\n2: free\n", 2, "free", "<tid>: free <ptr>", "2: free"},
		{"aosp/thread_done", AOSP, "202: thread_done\n", 1, "thread_done", "<tid>: thread_done 0x0", "202: thread_done"},
		{"aosp/tid", AOSP, "4294967296: free 0x10\n", 1, "line", "<tid>: <action>", "4294967296: free 0x10"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := readString("t.txt", tt.text, tt.format)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want an *Error", err)
			}
			if e.File != "t.txt" || e.Line != tt.line || e.What != tt.what || !strings.Contains(e.Want, tt.want) || e.Got != tt.got {
				t.Errorf("err = %+v, want File t.txt, Line %d, What %q, Want containing %q, Got %q", *e, tt.line, tt.what, tt.want, tt.got)
			}
			if !strings.HasPrefix(e.Error(), "t.txt:") {
				t.Errorf("Error() = %q, want it to start with the file name", e.Error())
			}
		})
	}
}

// TestErrorMessage pins a malformed line's message: file, line, what was
// expected and what was found.
func TestErrorMessage(t *testing.T) {
	_, _, err := readString("systemui.txt", "202: malloc 0xb4827400 1024\n202: malloc 0xb4827400\n", AOSP)
	want := `systemui.txt:2: malloc: want "<tid>: malloc <ptr> <size> [<start ns> <end ns>] [@<stack>]", got "202: malloc 0xb4827400"`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}

// TestErrorSticky: after an error every call returns it.
func TestErrorSticky(t *testing.T) {
	r, err := NewReader(strings.NewReader("# carve trace v1\na 1 2\nbad\na 2 3\n"), "s", Native)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	_, err1 := r.Next()
	_, err2 := r.Next()
	n, err3 := r.Read(make([]Event, 4))
	if err1 == nil || err2 != err1 || err3 != err1 || n != 0 {
		t.Errorf("errors %v, %v, %v (n %d), want the same error thrice", err1, err2, err3, n)
	}
}

// TestDetect checks detection from the first lines.
func TestDetect(t *testing.T) {
	tests := []struct {
		text string
		want Format
	}{
		{"# carve trace v1\n", Native},
		{"\n\n# carve trace v1\na 1 2\n", Native},
		{"20000\n6\n13\n1\na 0 2040\n", Rep},
		{"20000 6 13 1\n", Rep},
		{"202: malloc 0xb4827400 1024\n", AOSP},
		{"= Start\n", Mtrace},
		{"@ ./prog:[0x11d0] + 0x55a759ce62a0 0x10\n", Mtrace},
		{"+ 0x55a759ce62a0 0x10\n", Mtrace},
		{"--6388-- malloc(16) = 0x4A40040\n", Valgrind},
		{"--00:00:00:02.657 32570-- calloc(17,16) = 0x5241040\n", Valgrind},
		{"program output\nmore of it\n==12== Memcheck\n--12-- malloc(1) = 0x10\n", Valgrind},
		{"==12== Memcheck, a memory error detector\n", Valgrind},
		{"v 10400 3\nx 14 /tmp/prog\n", Heaptrack},
		{"+ 10 8 5627750451d0\n", Heaptrack},
		{"a 11c00 4\n+ 0\n", Heaptrack},
		{"t 1 0\na 10 1\n", Heaptrack},
		{"a 10 1\nm 1 /lib/libc.so.6\n+ 0\nf 1\n", Heaptrack},
		// A native trace without its header: its reader says so.
		{"l 1 main.x\na 1 2 @1\n", Native},
		{"a 1 2 @2\nl 2 x\n", Native},
		{"a 1 16\nt 2\nf 1\n", Native},
		{"a 1 16\n# comment\nr 1 32\n", Native},
		{"c 1 2 8 @3\n", Native},
		{"g 100 200\n", Native},
		{"hello world\n", Auto},
		{"", Auto},
		{"12 apples\n", Auto},
	}
	for _, tt := range tests {
		if got := detect([]byte(tt.text)); got != tt.want {
			t.Errorf("detect(%q) = %v, want %v", tt.text, got, tt.want)
		}
	}
	_, err := NewReader(strings.NewReader("hello world\n"), "h.txt", Auto)
	if !errors.Is(err, ErrDetect) || !strings.HasPrefix(err.Error(), "h.txt: ") {
		t.Errorf("NewReader of prose: err = %v, want ErrDetect naming h.txt", err)
	}
}

// TestHeaderlessNative: the body of a native trace, its header lost, is
// refused as such, not read as heaptrack data.
func TestHeaderlessNative(t *testing.T) {
	for _, text := range []string{"l 1 main.x\na 1 2 @1\nf 1\n", "a 1 16\nt 2\nf 1\n"} {
		_, _, err := readString("body", text, Auto)
		var e *Error
		if !errors.As(err, &e) || e.Line != 1 || e.What != "header" || !strings.Contains(e.Why, "header") {
			t.Errorf("%q: err = %v; want the native header's *Error at line 1 saying it is missing", text, err)
		}
	}
}

// TestFormatNames checks that every format's name parses back.
func TestFormatNames(t *testing.T) {
	for _, f := range append(Formats(), Auto) {
		g, err := ParseFormat(f.String())
		if err != nil || g != f {
			t.Errorf("ParseFormat(%q) = %v, %v, want %v", f.String(), g, err, f)
		}
	}
	if _, err := ParseFormat("xml"); err == nil {
		t.Error("ParseFormat(xml) succeeded")
	}
}

// TestMapping checks the importers' rules for events that do not fit an
// object's life, on AOSP lines (the rules are shared).
func TestMapping(t *testing.T) {
	tests := []struct {
		name  string
		lines string
		want  string // the native events, ";"-separated, without thread lines
		stats ReaderStats
	}{
		{"address reused after free", "1: malloc 0x10 8\n1: free 0x10\n1: malloc 0x10 16\n1: free 0x10",
			"a 1 8;f 1;a 2 16;f 2", ReaderStats{}},
		{"free of unknown address", "1: free 0x10\n1: malloc 0x10 8\n1: free 0x10\n1: free 0x10",
			"f 1;a 2 8;f 2;f 3", ReaderStats{UnknownFrees: 2}},
		{"missed free", "1: malloc 0x10 8\n1: malloc 0x10 16\n1: free 0x10",
			"a 1 8;f 1;a 2 16;f 2", ReaderStats{MissedFrees: 1}},
		{"realloc onto a live address", "1: malloc 0x10 8\n1: malloc 0x20 8\n1: realloc 0x20 0x10 32",
			"a 1 8;a 2 8;f 2;r 1 32", ReaderStats{MissedFrees: 1}},
		{"realloc in place", "1: malloc 0x10 8\n1: realloc 0x10 0x10 32\n1: free 0x10",
			"a 1 8;r 1 32;f 1", ReaderStats{}},
		{"realloc of unknown address", "1: realloc 0x20 0x10 32\n1: free 0x20",
			"a 1 32;f 1", ReaderStats{UnknownReallocs: 1}},
		{"realloc(NULL)", "1: realloc 0x20 0x0 32", "a 1 32", ReaderStats{}},
		{"realloc(p, 0) freeing", "1: malloc 0x10 8\n1: realloc 0x0 0x10 0", "a 1 8;f 1", ReaderStats{}},
		{"realloc(p, 0) to a block", "1: malloc 0x10 8\n1: realloc 0x30 0x10 0", "a 1 8;r 1 0", ReaderStats{}},
		{"failed realloc", "1: malloc 0x10 8\n1: realloc 0x0 0x10 64\n1: free 0x10", "a 1 8;f 1", ReaderStats{Failed: 1}},
		{"failed malloc", "1: malloc 0x0 8", "", ReaderStats{Failed: 1}},
		{"free(NULL)", "1: free 0x0", "", ReaderStats{NullFrees: 1}},
		{"calloc count beyond 32 bits", "1: calloc 0x10 4294967296 2", "c 1 1 8589934592", ReaderStats{}},
		{"alignment rounded up", "1: memalign 0x40 48 8\n1: memalign 0x80 0 8", "m 1 64 8;m 2 0 8", ReaderStats{}},
		{"pointer without 0x", "1: malloc b4827400 8\n1: free 0xb4827400", "a 1 8;f 1", ReaderStats{}},
		{"CRLF and blank lines", "1: malloc 0x10 8\r\n\r\n1: free 0x10\r\n", "a 1 8;f 1", ReaderStats{Skipped: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, r, err := readString("m", tt.lines, AOSP)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range evs {
				got = append(got, e.String())
			}
			if s := strings.Join(got, ";"); s != tt.want {
				t.Errorf("events %q, want %q", s, tt.want)
			}
			st := r.Stats()
			st.Lines, st.Events, st.ThreadsDone = 0, 0, 0
			if st != tt.stats {
				t.Errorf("stats %+v, want %+v", st, tt.stats)
			}
		})
	}
}

// TestLongLine checks that a line longer than MaxLine is read without
// being stored: skipped where it cannot be an event, an error where it
// could.
func TestLongLine(t *testing.T) {
	long := strings.Repeat("x", 3*MaxLine+17)
	text := "v 10400 3\nX ./prog " + long + "\n+ 10 1 5000\n- 5000\n"
	evs, r, err := readString("h", text, Heaptrack)
	if err != nil || len(evs) != 2 || r.Stats().Lines != 4 {
		t.Errorf("heaptrack with a long command line: %d events, %v, %+v; want 2 events", len(evs), err, r.Stats())
	}
	_, _, err = readString("n", "# carve trace v1\na 1 "+long+"\n", Native)
	var e *Error
	if !errors.As(err, &e) || e.Line != 2 || len(e.Got) > maxGot+3 {
		t.Errorf("native with a long line: err = %v, want an *Error at line 2 quoting at most %d bytes", err, maxGot)
	}
	// A long line where an event could be says so, in every format.
	for _, c := range []struct {
		format     Format
		text, what string
		line       int64
	}{
		{Native, long + "\n", "header", 1},
		{Native, "# carve trace v1\na 1 " + long, "line", 2},
		{Native, "# carve trace v2\nl 1 " + long, "line", 2},
		{Rep, "20000 6 13 1\na 0 " + long, "line", 2},
		{Valgrind, "--1-- malloc(" + long, "malloc", 1},
		{Heaptrack, "v 10400 3\n+ " + long, "alloc", 2},
		{Heaptrack, "v 10400 3\n- " + long, "free", 2},
		{Heaptrack, "v 10400 3\na " + long, "allocation info", 2},
		{Mtrace, "= Start\n@ [0x1] + 0x10 " + long, "line", 2},
		{AOSP, "1: malloc 0x10 " + long, "line", 1},
	} {
		_, _, err := readString("f", c.text, c.format)
		var e *Error
		if !errors.As(err, &e) || e.Line != c.line || e.What != c.what || e.Why != "line too long" ||
			e.Want != "a line of at most 64 KiB" || len(e.Got) > maxGot+3 {
			t.Errorf("%v, %.20q: err = %v; want an *Error at line %d, %s, of a line too long", c.format, c.text, err, c.line, c.what)
		}
	}
	// The line after a long one is read whole, from its first byte.
	evs, _, err = readString("c", "# carve trace v1\n# "+long+"\na 1 2\n", Native)
	if err != nil || len(evs) != 1 || evs[0] != (Event{Op: Alloc, ID: 1, Size: 2}) {
		t.Errorf("after a long comment: %v, %v", evs, err)
	}
}

// TestNextAndRead checks that Next and Read return the same events, with
// batches of every size.
func TestNextAndRead(t *testing.T) {
	in, err := readFileGz("../traces/aosp-systemui.txt.gz", 200000)
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := readString("s", string(in), AOSP)
	if err != nil {
		t.Fatal(err)
	}
	for _, batch := range []int{1, 2, 7, 1024} {
		r, err := NewReader(bytes.NewReader(in), "s", AOSP)
		if err != nil {
			t.Fatal(err)
		}
		var got []Event
		buf := make([]Event, batch)
		for {
			n, err := r.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				t.Fatal("Read returned 0 events and no error")
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("Read with batches of %d: %d events, want the %d of Next", batch, len(got), len(want))
		}
		if r.Stats().Events != int64(len(want)) {
			t.Errorf("Stats().Events = %d, want %d", r.Stats().Events, len(want))
		}
	}
}

// TestValgrindLostResult: a threaded program's log where valgrind printed
// another thread's call before an allocation's result.
func TestValgrindLostResult(t *testing.T) {
	text := "--1-- malloc(16) = 0x10\n--1-- malloc(1573)free(0x10)\n--1-- calloc(2,8)malloc(5) = 0x30\n--1-- free(0x30)\n"
	evs, r, err := readString("threads.log", text, Valgrind)
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{{Op: Alloc, ID: 1, Size: 16}, {Op: Free, ID: 1}, {Op: Alloc, ID: 2, Size: 5}, {Op: Free, ID: 2}}
	if len(evs) != len(want) {
		t.Fatalf("events %v, want %v", evs, want)
	}
	for i := range want {
		if evs[i].Op != want[i].Op || evs[i].ID != want[i].ID || evs[i].Size != want[i].Size {
			t.Errorf("event %d = %v, want %v", i, evs[i], want[i])
		}
	}
	if n := r.Stats().Invisible; n != 2 {
		t.Errorf("Invisible = %d, want 2", n)
	}
}
