//go:build !race

package summary

const raceEnabled = false
