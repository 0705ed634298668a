package heap

import (
	"github.com/carvelab/carve/internal/gentest"
	"testing"
)

// TestClassesUpToDate runs the generator and compares its output with
// classes.go: the table must be the generator's, not edited by hand.
func TestClassesUpToDate(t *testing.T) {
	gentest.UpToDate(t, "mkclasses.go", "classes.go", "heap")
}

// TestClassMagic checks the division by multiplication that finds a slot
// from its offset in a page, for every offset of every class.
func TestClassMagic(t *testing.T) {
	var z smallZone
	if err := z.init(pageSize, false); err != nil {
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
