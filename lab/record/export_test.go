package record

import (
	"time"

	"github.com/carvelab/carve/lab/internal/cbuild"
)

// Internals for the tests (package record_test).

// Builds returns how many libraries this process has compiled.
func Builds() int64 { return cbuild.Builds() }

var (
	Environ         = environ
	ValgrindProgram = valgrindProgram
)

// ParseGoTest reads a go test command line as Record does, the trace
// going to traceFile unless it names its own.
func ParseGoTest(cmd []string, traceFile string) (argv []string, trace string, packages []string, isTest bool, err error) {
	t, isTest, err := parseGoTest(cmd, traceFile)
	if t == nil {
		return nil, "", nil, isTest, err
	}
	return t.argv, t.trace, t.packages, isTest, err
}

var Godebug = godebug

// SetServiceSlack sets how much longer than its trace FromService waits
// for a service, and returns the function that puts it back.
func SetServiceSlack(d time.Duration) func() {
	old := serviceSlack
	serviceSlack = d
	return func() { serviceSlack = old }
}

// CountLines reads a mapped log as Record reads carve's.
func CountLines(path string) (lines, size int64, cut int, err error) {
	_, lines, size, cut, err = countLines(path, true)
	return lines, size, cut, err
}
