//go:build race

package record

// raceEnabled: a build with the race detector, whose allocations are not
// a release build's.
const raceEnabled = true
