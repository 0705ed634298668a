//go:build race

package rows

// raceEnabled: this is a build with the race detector (carve's own tests
// run under it).
const raceEnabled = true

// raceGoNeed: the race detector's shadow of the Go heap counts in a
// process's resident memory (not that of the memory carve's allocators
// map, which it does not shadow), so the go row's need is raceGoNeed
// times its release need: under -race, a go row's child of carve's tests
// reached 1.13 times its release need.
const raceGoNeed = 2
