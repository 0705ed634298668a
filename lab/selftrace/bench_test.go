package selftrace_test

import (
	"io"
	"os"
	"runtime/trace"
	"testing"
)

var one *thing

// BenchmarkAlloc measures the allocation of a 48-byte pointer-free
// object with no trace running, with an execution trace running, and with
// one that holds the heap's events (traceallocfree=1, as selftrace starts
// it), the trace going to io.Discard. Compare them with benchstat -col
// /trace.
func BenchmarkAlloc(b *testing.B) {
	if trace.IsEnabled() {
		b.Skip("a trace is running already (go test -trace)")
	}
	for _, bc := range []struct {
		name      string
		allocFree string // "": no trace
	}{
		{"trace=none", ""},
		{"trace=plain", "0"},
		{"trace=allocfree", "1"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if bc.allocFree != "" {
				old, had := os.LookupEnv("GODEBUG")
				os.Setenv("GODEBUG", "traceallocfree="+bc.allocFree)
				err := trace.Start(io.Discard)
				if had {
					os.Setenv("GODEBUG", old)
				} else {
					os.Unsetenv("GODEBUG")
				}
				if err != nil {
					b.Fatal(err)
				}
				defer trace.Stop()
			}
			for b.Loop() {
				one = &thing{a: 1}
			}
		})
	}
}
