//go:build race

package main

// raceEnabled: the race detector shadows the Go heap with memory of its
// own, which the Go heap's RSS then includes.
const raceEnabled = true
