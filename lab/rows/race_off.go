//go:build !race

package rows

// raceEnabled: this is a build with the race detector (race_on.go).
const raceEnabled = false

const raceGoNeed = 1
