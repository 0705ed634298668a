// Package selftrace lets a Go program record its own heap for carve's lab
// (see package lab): a program calls it once, first thing in main,
//
//	func main() {
//		defer selftrace.Start()()
//		...
//	}
//
// and "carve record -o FILE -- ./program" runs it with the environment
// variable [Env] naming a file, to which the program writes its Go
// execution trace with the runtime's alloc/free events; carve converts it
// into a trace of every heap object with its type, as it does for go
// test (see package record, Go programs). Without the variable, Start
// does nothing and the program runs as it would without it.
//
// A Go program cannot record itself by importing a package alone: Go has
// no exit hook, and an execution trace that is not stopped ends in a
// generation cut short, which the trace's reader refuses ("incomplete
// generation found"). So the function Start returns must run: deferred in
// main it runs when main returns (or panics). Start also stops the trace
// on SIGINT and SIGTERM, and then lets the signal end the program as it
// would have. A program that ends otherwise (os.Exit, log.Fatal, another
// signal) loses its trace, unless it calls the function Start returned
// first.
//
// The runtime writes the heap's events only when the trace starts with
// GODEBUG=traceallocfree=1 (carve record sets it). It reads the setting
// when the trace starts, not only when the program starts, and a change of
// GODEBUG through os.Setenv reaches it; so Start sets it for that moment
// and puts the environment back, and a program started by hand with only
// the variable Env set records its heap too.
//
// What the trace costs: starting it stops the world while the runtime
// writes a snapshot of the whole heap (an event for every object alive:
// about 1 ms for a heap of 5 MiB, 15 ms for 65 MiB, measured on the
// development machine), and every allocation and every sweep is an event
// while it runs (BenchmarkAlloc: a 48-byte object cost 175 ns to allocate
// with the heap's events traced, 23.0 ns with no trace, on one core, the
// medians of six runs).
package selftrace

import (
	"fmt"
	"os"
	"os/signal"
	"runtime/trace"
	"sync"
	"syscall"
)

// Env is the environment variable that names the file the trace goes to.
// Start takes it out of the environment, so that the programs this one
// starts do not write the same file.
const Env = "CARVE_SELFTRACE"

// Start starts the program's execution trace, with the heap's alloc/free
// events, writing to the file the environment variable Env names, and
// returns the function that stops it and closes the file; calling that
// function again does nothing. Without the variable, Start does nothing
// and returns a function that does nothing; so does a second call of
// Start. A failure (the file cannot be created, a trace is already
// running) is written to standard error, and the program runs on without
// a trace.
//
// Until the trace is stopped, SIGINT and SIGTERM stop it: the trace is
// flushed and the signal is sent again, to end the program as it would
// have. A program that handles these signals itself (signal.Notify) gets
// the signal twice: once when it comes, once sent again.
func Start() (stop func()) {
	path, ok := os.LookupEnv(Env)
	if !ok || path == "" {
		return func() {}
	}
	os.Unsetenv(Env)
	stop, err := start(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "selftrace: %v\n", err)
		return func() {}
	}
	return stop
}

// start starts the trace into the file at path and the watch for signals.
func start(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := startAllocFree(f); err != nil {
		f.Close() // the file stays, empty: carve record says the trace did not start
		return nil, fmt.Errorf("the execution trace did not start: %w", err)
	}
	done := make(chan struct{})
	sigs := make(chan os.Signal, 1)
	stop := sync.OnceFunc(func() {
		signal.Stop(sigs)
		close(done)
		trace.Stop() // returns when every byte of the trace is written
		if err := f.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "selftrace: %v\n", err)
		}
	})
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-done:
		case sig := <-sigs:
			stop()
			raise(sig)
		}
	}()
	return stop, nil
}

// startAllocFree starts the execution trace with traceallocfree=1 in
// GODEBUG, which the runtime reads as the trace starts, then puts GODEBUG
// back as it was. (os.Setenv of GODEBUG updates the runtime's settings; a
// later setting of a name overrides an earlier one.)
func startAllocFree(f *os.File) error {
	old, had := os.LookupEnv("GODEBUG")
	v := "traceallocfree=1"
	if old != "" {
		v = old + "," + v
	}
	os.Setenv("GODEBUG", v)
	err := trace.Start(f)
	if had {
		os.Setenv("GODEBUG", old)
	} else {
		os.Unsetenv("GODEBUG")
	}
	return err
}

// raise sends sig to this process again, with the watch for it stopped,
// so that it has its usual effect: for a program that does not handle it,
// the end of the program by that signal. Where a process cannot signal
// itself, the program exits with status 2.
func raise(sig os.Signal) {
	p, err := os.FindProcess(os.Getpid())
	if err == nil {
		err = p.Signal(sig)
	}
	if err != nil {
		os.Exit(2)
	}
}
