//go:build race

package gen

// raceEnabled is true under the race detector, which makes the tests
// that run big generators with their defaults too slow: they run in the
// plain test run only.
const raceEnabled = true
