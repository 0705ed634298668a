package pool_test

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"

	"github.com/carvelab/carve/internal/invariants"
)

// inlineBudget is the Go compiler's budget for inlining a function
// (inlineMaxBudget in cmd/compile/internal/inline).
const inlineBudget = 80

// TestAllocFreeInline fails if (*Pool).Alloc or (*Pool).Free stops
// inlining in release builds, as their docs promise they do. It builds the
// package with -gcflags=-m=2, which prints the inliner's decision and cost
// for every function, and reads the lines of those two methods only.
//
// When a Go release changes the inliner's costs and this test fails, run
//
//	go build -gcflags=-m=2 ./pool 2>&1 | grep -E 'inline \(\*Pool\)\.(Alloc|Free)\b'
//
// and bring the method back under the budget: keep the fast path to the
// pop or the push and move the rest to the slow path, which comes in as a
// parameter (see allocVia) because the inliner charges a call to a
// parameter less than a call to a function. If that cannot be done, the
// promise is broken: change the docs of Alloc and Free, the cost model in
// the root doc.go and this test together. (With Go 1.26 the costs are 78
// and 79 of 80.)
func TestAllocFreeInline(t *testing.T) {
	if invariants.Enabled {
		t.Skip("checked builds (-tags carvecheck) send Alloc and Free to their slow paths; the promise is the release build's")
	}
	if testing.Short() {
		t.Skip("builds the package: skipped in -short mode")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no go command to build the package with: %v", err)
		}
		t.Skipf("no go command to build the package with: %v", err)
	}
	// The package directory is the test's working directory. GOFLAGS is
	// cleared so that no -tags from the environment reaches the build.
	cmd := exec.Command(gobin, "build", "-gcflags=-m=2", ".")
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build -gcflags=-m=2: %v\n%s", err, out)
	}
	can := regexp.MustCompile(`(?m): can inline \(\*Pool\)\.(Alloc|Free) with cost (\d+) as:`)
	cannot := regexp.MustCompile(`(?m): cannot inline \(\*Pool\)\.(Alloc|Free): (.*)$`)
	seen := map[string]bool{}
	for _, m := range can.FindAllSubmatch(out, -1) {
		name := string(m[1])
		cost, _ := strconv.Atoi(string(m[2]))
		seen[name] = true
		t.Logf("(*Pool).%s inlines with cost %d of %d", name, cost, inlineBudget)
	}
	for _, m := range cannot.FindAllSubmatch(out, -1) {
		name := string(m[1])
		seen[name] = true
		t.Errorf("(*Pool).%s no longer inlines (%s); its doc promises it does. See this test's comment for what to do.", name, m[2])
	}
	for _, name := range []string{"Alloc", "Free"} {
		if !seen[name] {
			t.Errorf("go build -gcflags=-m=2 printed no inlining decision for (*Pool).%s: the compiler's output changed; update the patterns of this test", name)
		}
	}
}
