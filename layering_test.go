package carve_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The library's packages: the root and everything a Go program imports
// from carve, with the internal packages they share.
var library = []string{".", "./mem/...", "./pool/...", "./arena/...", "./lockfree/...", "./fit/...", "./buddy/...",
	"./sizeclass/...", "./heap/...", "./heapmap/...", "./internal/..."}

// TestLayering holds the two wings apart: no package of the library
// depends on a package of the lab (lab/...), in release and in checked
// builds, tests included; and only tests import the test helpers
// (internal/heaptest, internal/gentest).
func TestLayering(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	for _, tags := range []string{"", "carvecheck"} {
		args := append([]string{"list", "-deps", "-test", "-tags", tags, "-f", "{{.ImportPath}}"}, library...)
		out, err := exec.Command(goTool, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		for _, p := range strings.Fields(string(out)) {
			if strings.HasPrefix(p, "github.com/carvelab/carve/lab/") || strings.HasPrefix(p, "github.com/carvelab/carve/cmd/") {
				t.Errorf("tags %q: the library depends on %s", tags, p)
			}
		}
	}
	// The test helpers import testing: only tests may import them.
	helpers := []string{"github.com/carvelab/carve/internal/heaptest", "github.com/carvelab/carve/internal/gentest"}
	for _, tags := range []string{"", "carvecheck"} {
		args := append([]string{"list", "-tags", tags, "-f", "{{.ImportPath}} {{join .Deps \" \"}}"}, library...)
		out, err := exec.Command(goTool, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			pkg, deps := strings.Fields(line)[0], strings.Fields(line)[1:]
			for _, h := range helpers {
				if slices.Contains(deps, h) {
					t.Errorf("tags %q: %s depends on the test helpers %s", tags, pkg, h)
				}
			}
		}
	}
	out, err := exec.Command(goTool, "list", "./lab/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list ./lab/...: %v\n%s", err, out)
	}
	for _, want := range []string{"lab/trace", "lab/replay", "lab/report", "lab/record", "lab/traces", "lab/libc", "lab/advise"} {
		if !strings.Contains(string(out), "github.com/carvelab/carve/"+want+"\n") {
			t.Errorf("go list ./lab/... lists no %s:\n%s", want, out)
		}
	}
}
