package record

// Internals for the tests (package record_test).

// Builds returns how many libraries this process has compiled.
func Builds() int64 { return builds.Load() }

var (
	Environ         = environ
	ValgrindProgram = valgrindProgram
)
