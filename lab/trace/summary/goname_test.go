package summary

import (
	"errors"
	"testing"
)

func TestGoName(t *testing.T) {
	tests := []struct {
		stat LabelStat
		want string
	}{
		{LabelStat{Name: "uint8", Size: 1, MinSize: 16, MaxSize: 4096}, "[]byte"},
		{LabelStat{Name: "uint8", Size: 1, MinSize: 2, MaxSize: 2}, "[]byte"},
		{LabelStat{Name: "uint8", Size: 1, MinSize: 1, MaxSize: 1}, "uint8"},
		{LabelStat{Name: "int64", Size: 8, MinSize: 16, MaxSize: 64}, "[]int64"},
		{LabelStat{Name: "int64", Size: 8, MinSize: 8, MaxSize: 8}, "int64"},
		{LabelStat{Name: "main.Entry", Size: 40, MinSize: 48, MaxSize: 48}, "main.Entry"},
		{LabelStat{Name: "main.Entry", Size: 40, MinSize: 48, MaxSize: 80}, "[]main.Entry"},
		{LabelStat{Name: "main.x", Size: -1, MinSize: 8, MaxSize: 64}, "main.x"},
		{LabelStat{Name: "main.empty", Size: 0, MinSize: 8, MaxSize: 64}, "main.empty"},
		{LabelStat{}, ""},
	}
	for _, tt := range tests {
		if got := tt.stat.GoName(); got != tt.want {
			t.Errorf("%+v.GoName() = %q, want %q", tt.stat, got, tt.want)
		}
	}
}

func TestFindLabel(t *testing.T) {
	bytes := LabelStat{Label: 1, Name: "uint8", Size: 1, MinSize: 16, MaxSize: 4096}
	headers := LabelStat{Label: 2, Name: "[]uint8", Size: 24, MinSize: 24, MaxSize: 24}
	entry := LabelStat{Label: 3, Name: "main.Entry", Size: 40, MinSize: 48, MaxSize: 48}
	ints := LabelStat{Label: 4, Name: "int64", Size: 8, MinSize: 64, MaxSize: 64}
	stats := []LabelStat{{Name: ""}, bytes, headers, entry, ints}
	tests := []struct {
		name string
		want uint32 // 0: not found
		err  string
	}{
		{"[]byte", 1, ""},
		{"uint8", 1, ""},
		{"[]uint8", 1, ""}, // the element label wins over the slice headers'
		{"main.Entry", 3, ""},
		{"[]int64", 4, ""},
		{"int64", 4, ""},
		{"main.Entyr", 0, `no type "main.Entyr" in the trace; did you mean main.Entry?`},
		{"[]bytes", 0, `no type "[]bytes" in the trace; did you mean []byte?`},
		{"nosuch", 0, `no type "nosuch" in the trace (carve stats lists its types)`},
		{"", 0, `no type "" in the trace (carve stats lists its types)`},
	}
	for _, tt := range tests {
		got, err := FindLabel(stats, tt.name)
		switch {
		case tt.want != 0 && (err != nil || got.Label != tt.want):
			t.Errorf("FindLabel(%q) = label %d, %v; want label %d", tt.name, got.Label, err, tt.want)
		case tt.want == 0 && (err == nil || err.Error() != tt.err || !errors.Is(err, ErrNoLabel)):
			t.Errorf("FindLabel(%q) = label %d, %v; want the error %q", tt.name, got.Label, err, tt.err)
		}
	}
	// Without a uint8 label, "[]uint8" is the label of that name.
	if got, err := FindLabel([]LabelStat{headers}, "[]uint8"); err != nil || got.Label != 2 {
		t.Errorf(`FindLabel(headers only, "[]uint8") = %d, %v; want label 2`, got.Label, err)
	}
	var le *LabelError
	_, err := FindLabel(stats, "main.Entyr")
	if errors.As(err, &le) {
		le.In = "go.trace"
	}
	if want := `no type "main.Entyr" in go.trace; did you mean main.Entry?`; err.Error() != want {
		t.Errorf("with In: %q, want %q", err, want)
	}
}
