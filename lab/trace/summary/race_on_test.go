//go:build race

package summary

// raceEnabled is true under the race detector, which makes the test that
// summarizes the whole shipped trace too slow: it runs in the plain test
// run only.
const raceEnabled = true
