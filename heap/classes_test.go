package heap

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestClassesUpToDate runs the generator and compares its output with
// classes.go: the table must be the generator's, not edited by hand.
func TestClassesUpToDate(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("go not on PATH, and CI=true: cannot check that classes.go is generated: %v", err)
		}
		t.Skipf("go not on PATH: %v", err)
	}
	out := filepath.Join(t.TempDir(), "classes.go")
	cmd := exec.Command(gobin, "run", "mkclasses.go", "-output", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run mkclasses.go: %v\n%s", err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("classes.go")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("classes.go differs from what mkclasses.go generates; run go generate ./heap")
	}
}

// TestClassMagic checks the division by multiplication that finds a slot
// from its offset in a page, for every offset of every class.
func TestClassMagic(t *testing.T) {
	var z smallZone
	if err := z.init(pageSize); err != nil {
		t.Fatal(err)
	}
	defer z.vm.release()
	for c := 1; c < numClasses; c++ {
		cl := &z.classes[c]
		for o := uint64(0); o < pageSize; o++ {
			if got, want := int(o*cl.magic>>32), int(o/uint64(cl.size)); got != want {
				t.Fatalf("class %d (%d bytes): offset %d gives slot %d, want %d", c, cl.size, o, got, want)
			}
		}
		if cl.slots*int(cl.size) > pageSize || (cl.slots+1)*int(cl.size) <= pageSize {
			t.Fatalf("class %d (%d bytes): %d slots a page, want as many as fit", c, cl.size, cl.slots)
		}
	}
}
