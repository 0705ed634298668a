//go:build race

package rows

const raceEnabled = true
