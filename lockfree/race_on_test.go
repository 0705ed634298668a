//go:build race

package lockfree_test

// raceEnabled reports whether the test binary was built with -race, which
// slows the stress test down about ten times: it runs fewer operations.
const raceEnabled = true
