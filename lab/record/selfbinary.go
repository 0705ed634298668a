package record

import (
	"context"
	"debug/buildinfo"
	"debug/elf"
	"debug/gosym"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/carvelab/carve/lab/selftrace"
	"github.com/carvelab/carve/lab/trace"
)

// ErrSelftrace is wrapped by Record's error for a binary built with
// package selftrace that wrote no trace carve can read: it did not call
// selftrace.Start, the trace did not start, or the program ended without
// stopping it. It wraps ErrGoProgram.
var ErrSelftrace = fmt.Errorf("%w: no trace from package selftrace", ErrGoProgram)

// The module and the package a binary that traces itself is built with.
const (
	carveModule  = "github.com/carvelab/carve"
	selftracePkg = carveModule + "/lab/selftrace"
)

// goProgram is what a Go binary's build information and function table
// tell.
type goProgram struct {
	path      string
	cgo       bool
	carve     bool // built with carve's module
	selftrace selftraceUse
}

// selftraceUse says whether a Go binary can trace itself.
type selftraceUse int

const (
	// noSelftrace: the binary is not built with carve's module, or its
	// function table holds none of package selftrace's functions.
	noSelftrace selftraceUse = iota
	// selftraceLinked: package selftrace's functions are in the binary;
	// the linker keeps them only when the program calls one.
	selftraceLinked
	// selftraceMaybe: the binary is built with carve's module, and its
	// function table cannot be read (not ELF).
	selftraceMaybe
)

// goBinary returns what the program cmd[0] names is as a Go binary, or
// nil if it is none.
func goBinary(cmd []string) *goProgram {
	path, err := exec.LookPath(cmd[0])
	if err != nil {
		return nil
	}
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil
	}
	p := &goProgram{path: path}
	for _, s := range info.Settings {
		if s.Key == "CGO_ENABLED" && s.Value == "1" {
			p.cgo = true
		}
	}
	p.carve = info.Main.Path == carveModule
	for _, m := range info.Deps {
		p.carve = p.carve || m.Path == carveModule
	}
	if p.carve {
		p.selftrace = selftraceIn(path)
	}
	return p
}

// whyNoSelftrace says, for a binary built with carve's module that cannot
// trace itself, why not; it is "" for any other.
func (p *goProgram) whyNoSelftrace() string {
	if !p.carve || p.selftrace != noSelftrace {
		return ""
	}
	return ", and though it is built with carve's module it holds no function of package selftrace " +
		"(an import that calls nothing of it links nothing): call defer selftrace.Start()() first in main"
}

// selftraceIn reads the function table of the binary at path (the
// pclntab, which stripping keeps) for package selftrace's functions.
// Start may be inlined into main; the functions it calls are not.
func selftraceIn(path string) selftraceUse {
	f, err := elf.Open(path)
	if err != nil {
		return selftraceMaybe
	}
	defer f.Close()
	pcln, text := f.Section(".gopclntab"), f.Section(".text")
	if pcln == nil || text == nil {
		return selftraceMaybe
	}
	data, err := pcln.Data()
	if err != nil {
		return selftraceMaybe
	}
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	if err != nil {
		return selftraceMaybe
	}
	for _, fn := range tab.Funcs {
		if strings.HasPrefix(fn.Name, selftracePkg+".") {
			return selftraceLinked
		}
	}
	return noSelftrace
}

// recordSelftrace runs a Go binary built with package selftrace with the
// file its trace goes to in selftrace.Env and GODEBUG=traceallocfree=1,
// and converts the trace.
func recordSelftrace(ctx context.Context, cmd []string, out io.Writer, opt Options, res *Result) error {
	dir, err := os.MkdirTemp("", "carve-record-")
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "self.trace")
	env := append(godebug(environ(os.Environ(), opt.Env, nil)), selftrace.Env+"="+path)
	rss := newRSSSampler("")
	pid, runErr := run(ctx, cmd, env, opt, rss)
	if pid == 0 {
		return runErr
	}
	res.Process = Process{Pid: pid, Program: commandLine(cmd)}
	clocked := clockedRSS{samples: rss.of(pid), of: trace.RSSProgram, none: noRSSProcess}
	if rss == nil {
		clocked.none = noRSSOS
	}
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return errors.Join(runErr, &described{fmt.Sprintf("record: %s wrote no trace: it is built with package selftrace (%s) but did not call selftrace.Start; call it first thing in main: defer selftrace.Start()()",
			cmd[0], selftracePkg), []error{ErrSelftrace, ErrNoEvents}})
	case st.Size() == 0:
		return errors.Join(runErr, &described{fmt.Sprintf("record: %s called selftrace.Start, and its trace is empty: the trace did not start (selftrace says why on the program's standard error), or the program ended before a byte of it was written, without the function Start returned running",
			cmd[0]), []error{ErrSelftrace, ErrNoEvents}})
	}
	err = convertGo(res, path, path, opt, clocked, out, fmt.Sprintf("recorded by carve record -- %s\nfrom the execution trace process %d wrote of itself (package selftrace, GODEBUG=traceallocfree=1)", commandLine(cmd), pid))
	// selftrace starts the trace with the heap's events, so a trace
	// without them, or whose last generation is cut short (x/exp/trace
	// says "incomplete generation"), is one that was not stopped: the
	// runtime writes a generation's batches as it ends.
	const notStopped = "the function selftrace.Start returned must run before the program ends; os.Exit and log.Fatal skip deferred calls, so call it before them"
	switch {
	case errors.Is(err, trace.ErrNoGoHeap):
		err = &described{fmt.Sprintf("record: %s did not stop its trace, which ends before its first generation does (%d bytes): %s",
			cmd[0], st.Size(), notStopped), []error{ErrSelftrace, err}}
	case errors.Is(err, trace.ErrGoTrace) && strings.Contains(err.Error(), "incomplete generation"):
		err = &described{fmt.Sprintf("record: %s did not stop its trace, which ends cut short (%v): %s",
			cmd[0], err, notStopped), []error{ErrSelftrace, err}}
	}
	return errors.Join(runErr, err)
}
