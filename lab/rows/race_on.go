//go:build race

package rows

// raceEnabled: this is a build with the race detector (carve's own tests
// run under it). Its shadow memory of the Go heap counts in a process's
// resident memory, so a row's need is raceNeed times what it is in a
// release build: under -race, a go row's child of carve's tests reached
// 1.13 times its release need.
const raceEnabled = true

const raceNeed = 4
