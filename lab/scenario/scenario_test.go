package scenario

import (
	"slices"
	"strings"
	"testing"
)

// TestTable: every scenario has a name of its own, a doc that names each
// flag it reads (carve help scenario prints the doc, the flags' help
// names the scenarios), a Run, and a count for its N; Names and Lookup
// agree with the table.
func TestTable(t *testing.T) {
	if len(Names) != len(Scenarios) {
		t.Fatalf("Names %q, want the %d scenarios' names", Names, len(Scenarios))
	}
	for i, s := range Scenarios {
		if Names[i] != s.Name || slices.Index(Names, s.Name) != i {
			t.Errorf("Names[%d] = %q, want %q once", i, Names[i], s.Name)
		}
		if got, ok := Lookup(s.Name); !ok || got.Name != s.Name {
			t.Errorf("Lookup(%q) = %q, %t", s.Name, got.Name, ok)
		}
		if s.Run == nil || s.Doc == "" || strings.Contains(s.Doc, "\n") {
			t.Errorf("%s: want a Run and a doc of one line", s.Name)
		}
		if (s.N > 0) != (s.Count != "") {
			t.Errorf("%s: N %d, Count %q: want both or neither", s.Name, s.N, s.Count)
		}
		for _, f := range []string{"n", "next", "from", "smalls"} {
			if s.Reads(f) != strings.Contains(s.Doc, "--"+f+" ") {
				t.Errorf("%s reads --%s: %t, but its doc %q says otherwise", s.Name, f, s.Reads(f), s.Doc)
			}
		}
	}
	if _, ok := Lookup("nosuch"); ok {
		t.Error(`Lookup("nosuch") found a scenario`)
	}
}
