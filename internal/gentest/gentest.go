// Package gentest checks that a package's generated file is what its
// generator writes today, for the tests of the packages whose tables are
// generated (heap, sizeclass): the table must be the generator's, not
// edited by hand.
package gentest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// UpToDate runs the generator (a //go:build ignore program in the
// current directory that takes -output) and fails the test unless its
// output is file, byte for byte. pkg names the package for the error's
// advice (go generate ./pkg). Without a go command it skips, or fails
// when CI=true.
func UpToDate(t *testing.T, generator, file, pkg string) {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("go not on PATH, and CI=true: cannot check that %s is generated: %v", file, err)
		}
		t.Skipf("go not on PATH: %v", err)
	}
	out := filepath.Join(t.TempDir(), file)
	cmd := exec.Command(gobin, "run", generator, "-output", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run %s: %v\n%s", generator, err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from what %s generates; run go generate ./%s", file, generator, pkg)
	}
}
