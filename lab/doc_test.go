package lab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackagesListed: the overview's list of packages names every
// package of the lab but its internal ones, once.
func TestPackagesListed(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	_, list, _ := strings.Cut(string(doc), "# The packages\n//\n")
	list, _, _ = strings.Cut("\n"+list, "\n//\n")
	dirs, err := filepath.Glob("*/*.go")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range dirs {
		pkg := filepath.Dir(f)
		if pkg == "internal" || seen[pkg] || strings.HasSuffix(f, "_test.go") {
			continue
		}
		seen[pkg] = true
		if n := strings.Count(list, "\n//\t"+pkg+" "); n != 1 {
			t.Errorf("lab/doc.go's list of packages names %s %d times, want once", pkg, n)
		}
	}
	if len(seen) < 10 {
		t.Errorf("found %d packages under lab, want the lab's (10 or more)", len(seen))
	}
}
