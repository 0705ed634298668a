package text

import (
	"slices"
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
