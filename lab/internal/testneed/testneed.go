// Package testneed lets a test skip when the machine lacks a tool it
// needs, except under CI=true, where every tool is installed (.ci/run
// installs them) and a skip would hide a test that did not run.
package testneed

import (
	"os"
	"testing"
)

// Tool skips t when err says the tool what is missing, or fails it
// under CI=true. A nil err does nothing.
func Tool(t testing.TB, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is missing under CI=true: %v", what, err)
	}
	t.Skipf("%s is missing: %v", what, err)
}
