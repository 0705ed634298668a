package text

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestWrap(t *testing.T) {
	tests := []struct {
		in    string
		width int
		want  []string
	}{
		{"", 10, nil},
		{"   ", 10, nil},
		{"one", 10, []string{"one"}},
		{"one two three", 7, []string{"one two", "three"}},
		{"one two three", 8, []string{"one two", "three"}},
		{"one  two\nthree", 13, []string{"one two three"}},
		{"a verylongword b", 4, []string{"a", "verylongword", "b"}},
	}
	for _, tt := range tests {
		if got := Wrap(tt.in, tt.width); !slices.Equal(got, tt.want) {
			t.Errorf("Wrap(%q, %d) = %q, want %q", tt.in, tt.width, got, tt.want)
		}
	}
}

func TestFill(t *testing.T) {
	tests := []struct {
		words []string
		width int
		want  []string
	}{
		{nil, 10, nil},
		{[]string{"12 B 4 KiB,", "16 B 8 KiB,", "20 B -4 KiB"}, 24, []string{"12 B 4 KiB, 16 B 8 KiB,", "20 B -4 KiB"}},
		{[]string{"a", "an item too long", "b"}, 6, []string{"a", "an item too long", "b"}},
	}
	for _, tt := range tests {
		if got := Fill(tt.words, tt.width); !slices.Equal(got, tt.want) {
			t.Errorf("Fill(%q, %d) = %q, want %q", tt.words, tt.width, got, tt.want)
		}
	}
}

func TestCount(t *testing.T) {
	tests := []struct {
		n    int64
		noun string
		want string
	}{
		{0, "event", "0 events"},
		{1, "event", "1 event"},
		{2, "event", "2 events"},
		{999, "size", "999 sizes"},
		{1000, "size", "1,000 sizes"},
		{770279, "event", "770,279 events"},
		{1234567890, "byte", "1,234,567,890 bytes"},
		{-1024, "byte", "-1,024 bytes"},
		{-100, "byte", "-100 bytes"},
		{2, "other process", "2 other processes"},
		{1, "other process", "1 other process"},
		{2598, "mesh", "2,598 meshes"},
		{3, "batch", "3 batches"},
		{2, "box", "2 boxes"},
	}
	for _, tt := range tests {
		if got := Count(tt.n, tt.noun); got != tt.want {
			t.Errorf("Count(%d, %q) = %q, want %q", tt.n, tt.noun, got, tt.want)
		}
	}
}

func TestDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"main.Entry", "main.Entry", 0},
		{"main.Entyr", "main.Entry", 2},
		{"kitten", "sitting", 3},
		{"glibcc", "glibc", 1},
	}
	for _, tt := range tests {
		if got := Distance(tt.a, tt.b); got != tt.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestClosest(t *testing.T) {
	names := []string{"main.Entry", "main.entries", "[]byte", "string", "main.Meta"}
	tests := []struct {
		name string
		want []string
	}{
		{"main.Entyr", []string{"main.Entry"}},
		{"MAIN.ENTRY", []string{"main.Entry"}},
		{"[]bytes", []string{"[]byte"}},
		{"nosuch", nil},
		{"main.Mata", []string{"main.Meta"}},
	}
	for _, tt := range tests {
		if got := Closest(tt.name, names, 3); !slices.Equal(got, tt.want) {
			t.Errorf("Closest(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
	if got := Or([]string{"a", "b", "c"}); got != "a, b or c" {
		t.Errorf("Or = %q", got)
	}
}

func TestThousandsU(t *testing.T) {
	for _, tc := range []struct {
		n    uint64
		want string
	}{
		{0, "0"},
		{999, "999"},
		{1000, "1,000"},
		{1 << 63, "9,223,372,036,854,775,808"},
		{math.MaxUint64, "18,446,744,073,709,551,615"},
	} {
		if got := ThousandsU(tc.n); got != tc.want {
			t.Errorf("ThousandsU(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestGlue(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"grew 19.53 MiB, glibc 392.03 MiB's", []string{"grew", "19.53 MiB,", "glibc", "392.03 MiB's"}},
		{"0 B of B", []string{"0 B", "of", "B"}},
		{"a MiB alone", []string{"a", "MiB", "alone"}},
	} {
		if got := Glue(strings.Fields(c.in)); !slices.Equal(got, c.want) {
			t.Errorf("Glue(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := Wrap("the footprint of mimalloc 29.30 MiB, glibc 39.21 MiB", 43); len(got) != 2 || got[1] != "39.21 MiB" {
		t.Errorf("Wrap kept no unit with its number: %q", got)
	}
}

func TestHang(t *testing.T) {
	words := strings.Fields("verdict one two three four five six")
	got := Hang("> ", "    ", words, 30)
	want := []string{"> verdict one two three four", "    five six"}
	if !slices.Equal(got, want) {
		t.Errorf("Hang = %q, want %q", got, want)
	}
	if got := Hang("> ", "  ", words, 0); !slices.Equal(got, []string{"> verdict one two three four five six"}) {
		t.Errorf("Hang with no width = %q, want one line", got)
	}
}

func TestLines(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"short line\n  kept as it is\n", "short line\n  kept as it is\n"},
		{"one two three four five six seven eight nine", "one two three four five six\nseven eight nine"},
		{"  heap   one two three four five six seven", "  heap   one two three four\n         five six seven"},
		{"  gen: one two three four five six seven", "  gen: one two three four\n      five six seven"},
		{"  an indented paragraph goes on and on", "  an indented paragraph goes\n  on and on"},
		{"a block of memory that 19.53 MiB", "a block of memory that\n19.53 MiB"},
	} {
		got := Lines(tc.in, 30)
		if got != tc.want {
			t.Errorf("Lines(%q, 30) =\n%s\nwant\n%s", tc.in, got, tc.want)
		}
		for _, l := range strings.Split(got, "\n") {
			if len(l) > 30 {
				t.Errorf("Lines(%q, 30): %q is %d wide", tc.in, l, len(l))
			}
		}
	}
}
