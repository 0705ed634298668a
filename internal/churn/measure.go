package churn

import (
	"runtime/metrics"
	"time"
)

// CPUSample is a process's clocks at one point.
type CPUSample struct {
	Wall      time.Time
	User, Sys time.Duration // the process's CPU time (getrusage)
	Faults    int64         // the process's page faults that needed no I/O
	// GC and Busy are the GC's CPU time (/cpu/classes/gc/total) and the
	// time the Ps were busy (/cpu/classes/total less /cpu/classes/idle),
	// as of the end of the last GC cycle: the runtime updates them only
	// then, and counts a P's time whether or not the OS runs its thread,
	// so compare them only with each other.
	GC, Busy time.Duration
	Cycles   uint64 // GC cycles ended
}

// SampleCPU reads the process's clocks.
func SampleCPU() (CPUSample, error) {
	s := []metrics.Sample{
		{Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/cpu/classes/total:cpu-seconds"},
		{Name: "/cpu/classes/idle:cpu-seconds"},
	}
	metrics.Read(s)
	user, sys, faults, err := processCPU()
	return CPUSample{
		Wall:   time.Now(),
		User:   user,
		Sys:    sys,
		Faults: faults,
		GC:     time.Duration(s[0].Value.Float64() * 1e9),
		Busy:   time.Duration((s[2].Value.Float64() - s[3].Value.Float64()) * 1e9),
		Cycles: s[1].Value.Uint64(),
	}, err
}

// GoMemory returns the bytes the Go runtime holds from the OS less the
// heap pages it has given back, the bytes of its heap's objects, its free
// heap pages not given back, and its heap goal.
func GoMemory() (mapped, objects, free, goal int64) {
	s := []metrics.Sample{
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/gc/heap/goal:bytes"},
	}
	metrics.Read(s)
	v := func(i int) int64 { return int64(s[i].Value.Uint64()) }
	return v(0) - v(1), v(2), v(3), v(4)
}
