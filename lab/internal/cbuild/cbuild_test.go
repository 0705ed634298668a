package cbuild

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// testBuild is a program that prints what its two sources make.
func testBuild(msg string) Build {
	return Build{
		Name: "cbuild-test",
		Files: []File{
			{Name: "main.c", Src: []byte("#include <stdio.h>\n#include \"msg.h\"\nint main(void) { puts(MSG); return 0; }\n")},
			{Name: "msg.h", Src: []byte("#define MSG \"" + msg + "\"\n")},
		},
		Flags: []string{"main.c"},
	}
}

func needCompiler(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("cc"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no C compiler under CI=true: %v", err)
		}
		t.Skipf("no C compiler: %v", err)
	}
}

func TestPathBuildsOnceAndKeysOnContent(t *testing.T) {
	needCompiler(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("CC", "")
	before := Builds()
	a, err := testBuild("one").Path()
	if err != nil {
		t.Fatal(err)
	}
	if err := testBuild("one").Available(); err != nil {
		t.Errorf("Available after a build: %v", err)
	}
	again, err := testBuild("one").Path()
	if err != nil || again != a {
		t.Fatalf("second Path = %q, %v; want the cached %q", again, err, a)
	}
	if got := Builds() - before; got != 1 {
		t.Errorf("%d builds for one output asked twice, want 1", got)
	}
	b, err := testBuild("two").Path()
	if err != nil {
		t.Fatal(err)
	}
	if b == a {
		t.Fatalf("a header's change kept the cached path %q", a)
	}
	for path, want := range map[string]string{a: "one", b: "two"} {
		out, err := exec.Command(path).Output()
		if err != nil || strings.TrimSpace(string(out)) != want {
			t.Errorf("%s printed %q, %v; want %q", path, out, err, want)
		}
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(a), "*.build"))
	if len(left) != 0 {
		t.Errorf("build directories left in the cache: %q", left)
	}
}

func TestFailedBuildSaysWhy(t *testing.T) {
	needCompiler(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("CC", "")
	b := Build{Name: "cbuild-bad", Files: []File{{Name: "bad.c", Src: []byte("int main(void) { return nosuch; }\n")}}, Flags: []string{"bad.c"}}
	_, err := b.Path()
	if err == nil || !strings.Contains(err.Error(), "building cbuild-bad failed") || !strings.Contains(err.Error(), "nosuch") {
		t.Fatalf("Path of a source that does not compile: %v; want the compiler's message", err)
	}
}

func TestNoCompiler(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("CC", "/no/such/cc")
	b := testBuild("none")
	if _, err := b.Path(); !errors.Is(err, ErrNoCompiler) {
		t.Errorf("Path without a compiler: %v; want ErrNoCompiler", err)
	}
	if err := b.Available(); !errors.Is(err, ErrNoCompiler) {
		t.Errorf("Available without a compiler: %v; want ErrNoCompiler", err)
	}
}
