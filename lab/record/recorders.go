package record

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"

	"github.com/carvelab/carve/lab/trace"
)

// Default is the recorder Record uses when Options.Recorder is empty.
const Default = "carve"

// RecorderInfo describes a recorder: what its traces keep and lose,
// which processes of a run it records, and what it needs installed.
type RecorderInfo struct {
	Name      string // as Options.Recorder takes it
	Keeps     string
	Loses     string
	Processes string
	Needs     string
}

// recorder is how one tool is run and read.
type recorder struct {
	RecorderInfo
	format trace.Format
	// check reports what is missing, with how to install it.
	check func() error
	// prepare returns the command line that runs cmd under the recorder,
	// its logs going to dir, and the environment it adds.
	prepare func(dir string, cmd []string) (argv, env []string, err error)
	// program reads the recorded program's path from the head of one of
	// its logs, for the recorders that write no .exe file beside it.
	program func(head []byte) string
	// empty explains logs that hold no event (see Record).
	empty func(logs []logFile) error
	// mapped says the recorder's logs are mapped files, whose records
	// end at the first zero byte (carve's library).
	mapped bool
}

var recorders = []*recorder{carveRecorder, valgrindRecorder, heaptrackRecorder, mtraceRecorder, goRecorder}

// Recorders describes the recorders, the default first.
func Recorders() []RecorderInfo {
	infos := make([]RecorderInfo, len(recorders))
	for i, r := range recorders {
		infos[i] = r.RecorderInfo
	}
	return infos
}

// Available reports whether the recorder called name can run here: nil,
// or an error that names what is missing and how to install it.
func Available(name string) error {
	r, err := recorderNamed(name)
	if err != nil {
		return err
	}
	if runtime.GOOS != "linux" {
		return fmt.Errorf("record: recording needs Linux (LD_PRELOAD, glibc), not %s", runtime.GOOS)
	}
	return r.check()
}

// AvailableFor is Available for the recorder that Record would use for
// cmd: the go recorder for a go test command (when name is empty, the
// default or "go"), nothing for a Go binary that traces itself (package
// selftrace: it needs no tool), the recorder called name otherwise.
func AvailableFor(name string, cmd []string) error {
	if _, isTest, _ := parseGoTest(cmd, ""); isTest && (name == "" || name == Default || name == goRecorder.Name) {
		return goRecorder.check()
	}
	if name == "" || name == Default || name == goRecorder.Name {
		if len(cmd) > 0 {
			if bin := goBinary(cmd); bin != nil && bin.selftrace != noSelftrace {
				return nil // it writes its own trace
			}
		}
	}
	return Available(name)
}

func recorderNamed(name string) (*recorder, error) {
	if name == "" {
		name = Default
	}
	names := make([]string, len(recorders))
	for i, r := range recorders {
		if r.Name == name {
			return r, nil
		}
		names[i] = r.Name
	}
	return nil, fmt.Errorf("record: unknown recorder %q (want one of %s)", name, strings.Join(names, ", "))
}

// The environment variable that names the directory of logs to carve's
// libraries (preload/carve.c, preload/mtrace.c).
const dirVar = "CARVE_RECORD_DIR"

// stacksVar set to 0 makes carve's library leave out call stacks.
const stacksVar = "CARVE_RECORD_STACKS"

var carveRecorder = &recorder{
	RecorderInfo: RecorderInfo{
		Name: "carve",
		Keeps: "every call of malloc, free, calloc, realloc, reallocarray, memalign, posix_memalign, " +
			"aligned_alloc, valloc and pvalloc, with its alignment and calloc's count, the thread " +
			"that made it, in one order across threads, and its call stack (8 frames, unwound by the " +
			"binaries' .eh_frame; its site the innermost; --stacks=false leaves them out)",
		Loses: "calls made before the library is loaded (none in practice); the one call a process " +
			"is in when a signal ends it (each record goes whole into a shared mapping of the log, which " +
			"outlives the process however it ends); the calls after its log cannot grow (a full disk: " +
			"carve says so); it serializes the program's allocations (one lock per call); and time, with stacks: " +
			"unwinding each call's stack is most of its cost (perl ran 6.7× slower with them, 1.5× without)",
		Processes: "every process and exec'd program logs on its own; the busiest is kept",
		Needs:     "a C compiler at first use (cc or $CC: apt-get install gcc); a dynamically linked program",
	},
	format: trace.AOSP,
	mapped: true,
	check:  func() error { return cachedOrCompiler("carve", carveSource) },
	prepare: func(dir string, cmd []string) ([]string, []string, error) {
		lib, err := library("carve", carveSource)
		if err != nil {
			return nil, nil, err
		}
		return cmd, []string{dirVar + "=" + dir, preload + lib}, nil
	},
	empty: func(logs []logFile) error {
		switch {
		case len(logs) == 0:
			return notLoaded("carve's library")
		case logs[0].cut > 0:
			return fmt.Errorf("%w: the program ended (by a signal) while its first allocator call was being logged: that record was cut short and left out", ErrNoEvents)
		case logs[0].stopped != "":
			return fmt.Errorf("%w: %s", ErrNoEvents, logs[0].stopped)
		}
		return errNoCalls
	},
}

var valgrindRecorder = &recorder{
	RecorderInfo: RecorderInfo{
		Name: "valgrind",
		Keeps: "every call, with alignment and calloc's count (valgrind 3.20 and later print no " +
			"result for posix_memalign and aligned_alloc: those blocks are lost)",
		Loses: "threads; and time: the program runs on valgrind's emulated CPU, many times slower. " +
			"In a threaded program valgrind may switch threads between printing a call and its result: " +
			"the result is lost and the next call is printed on the same line; the importer counts that " +
			"block as invisible (a later free of it is a free of an unknown block)",
		Processes: "every process and exec'd program logs on its own (--trace-children=yes); the busiest is kept",
		Needs:     "valgrind (apt-get install valgrind)",
	},
	format: trace.Valgrind,
	check: func() error {
		_, err := valgrind()
		return err
	},
	prepare: func(dir string, cmd []string) ([]string, []string, error) {
		vg, err := valgrind()
		if err != nil {
			return nil, nil, err
		}
		// massif replaces malloc as memcheck does, which is what
		// --trace-malloc needs, without memcheck's shadow memory: about
		// twice as fast. Its profile is not wanted.
		argv := []string{vg, "--tool=massif", "--massif-out-file=/dev/null", "--trace-malloc=yes",
			"--trace-children=yes", "--log-file=" + filepath.Join(dir, "%p-0.log"), "--"}
		return append(argv, cmd...), nil, nil
	},
	program: valgrindProgram,
	empty:   func([]logFile) error { return errNoCalls },
}

func valgrind() (string, error) {
	vg, err := exec.LookPath("valgrind")
	if err != nil {
		return "", fmt.Errorf("record: the valgrind recorder needs valgrind (apt-get install valgrind): %w", err)
	}
	return vg, nil
}

// valgrindProgram reads the program from the "==<pid>== Command: " line
// of a valgrind log, where blanks in the path are escaped.
func valgrindProgram(head []byte) string {
	i := bytes.Index(head, []byte("== Command: "))
	if i < 0 {
		return ""
	}
	line := head[i+len("== Command: "):]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	var b strings.Builder
	for k := 0; k < len(line) && line[k] != ' '; k++ {
		if line[k] == '\\' && k+1 < len(line) {
			k++
		}
		b.WriteByte(line[k])
	}
	return b.String()
}

var heaptrackRecorder = &recorder{
	RecorderInfo: RecorderInfo{
		Name:  "heaptrack",
		Keeps: "malloc, calloc, realloc, posix_memalign and aligned_alloc as allocations and frees, each with its call stack (its site the innermost frame, named through its module records as the carve recorder's are)",
		Loses: "realloc, which it records as a free and an allocation (the object changes ID); " +
			"alignments and calloc's count; memalign (heaptrack 1.4 does not record it: such blocks' " +
			"frees count as unknown); realloc(p, 0); threads. heaptrack 1.4 can hang a child forked " +
			"by a threaded program, at the child's exit",
		Processes: "the first program only (heaptrack takes itself out of the environment); " +
			"a program that execs another (a shell script, a pyenv shim) loses its data: record the program itself",
		Needs: "heaptrack (apt-get install heaptrack)",
	},
	format: trace.Heaptrack,
	check: func() error {
		_, err := heaptrackLibrary()
		return err
	},
	prepare: func(dir string, cmd []string) ([]string, []string, error) {
		lib, err := heaptrackLibrary()
		if err != nil {
			return nil, nil, err
		}
		// heaptrack -r runs the program with this library preloaded and
		// DUMP_HEAPTRACK_OUTPUT naming a pipe to a compressor; carve runs
		// it the same way, the raw data going to a file, without the
		// script's messages on the program's standard output.
		return cmd, []string{"DUMP_HEAPTRACK_OUTPUT=" + filepath.Join(dir, "heaptrack.log"), preload + lib}, nil
	},
	program: heaptrackProgram,
	empty: func(logs []logFile) error {
		switch {
		case len(logs) == 0:
			return notLoaded("heaptrack's library")
		case logs[0].Lines == 0:
			return fmt.Errorf("%w: heaptrack wrote nothing: it records the first program only, and loses "+
				"its data when that program execs another (a shell script, a wrapper such as a pyenv shim); "+
				"record the program itself", ErrNoEvents)
		}
		return errNoCalls
	},
}

// heaptrackLibrary finds heaptrack's preload library where the heaptrack
// script looks for it: LIB_REL_PATH, relative to the script.
func heaptrackLibrary() (string, error) {
	bin, err := exec.LookPath("heaptrack")
	if err != nil {
		return "", fmt.Errorf("record: the heaptrack recorder needs heaptrack (apt-get install heaptrack): %w", err)
	}
	if real, err := filepath.EvalSymlinks(bin); err == nil {
		bin = real
	}
	rel := "../lib/heaptrack"
	if script, err := os.ReadFile(bin); err == nil {
		if m := libRelPath.FindSubmatch(script); m != nil {
			rel = string(m[1])
		}
	}
	lib := filepath.Join(filepath.Dir(bin), rel, "libheaptrack_preload.so")
	if _, err := os.Stat(lib); err != nil {
		return "", fmt.Errorf("record: heaptrack's preload library is not where its script %s says: %w (reinstall heaptrack)", bin, err)
	}
	return preloadable(lib)
}

var libRelPath = regexp.MustCompile(`(?m)^LIB_REL_PATH="([^"$]*)"`)

// heaptrackProgram reads the program from the "x <length> <path>" record
// of heaptrack's raw data.
func heaptrackProgram(head []byte) string {
	for line := range bytes.Lines(head) {
		if f := bytes.Fields(line); len(f) == 3 && string(f[0]) == "x" {
			return string(f[2])
		}
	}
	return ""
}

var mtraceRecorder = &recorder{
	RecorderInfo: RecorderInfo{
		Name:  "mtrace",
		Keeps: "malloc, calloc, realloc, memalign, posix_memalign and aligned_alloc, with realloc kept whole",
		Loses: "alignments and calloc's count (glibc logs them as plain allocations); threads; and, " +
			"in threaded programs, the order of calls: glibc logs each call after it returns, so an " +
			"address may be logged allocated again before its free (the importer counts a missed free)",
		Processes: "every exec'd program logs on its own, the busiest is kept; forked children are not recorded",
		Needs: "glibc; since glibc 2.34 its libc_malloc_debug.so.0 (in Debian's libc6); " +
			"a C compiler at first use (cc or $CC: apt-get install gcc)",
	},
	format: trace.Mtrace,
	check:  func() error { return cachedOrCompiler("mtrace", mtraceSource) },
	prepare: func(dir string, cmd []string) ([]string, []string, error) {
		lib, err := library("mtrace", mtraceSource)
		if err != nil {
			return nil, nil, err
		}
		libs := lib
		if debug := mallocDebug(); debug != "" {
			libs = debug + ":" + lib
		}
		// A placeholder longer than any log's path, which the library
		// writes the path of its process's log over (see preload/mtrace.c).
		placeholder := filepath.Join(dir, strings.Repeat("x", 28)+".log")
		return cmd, []string{dirVar + "=" + dir, "MALLOC_TRACE=" + placeholder, preload + libs}, nil
	},
	empty: func(logs []logFile) error {
		if len(logs) == 0 {
			return notLoaded("carve's mtrace library")
		}
		if logs[0].Lines == 0 {
			if mallocDebug() == "" {
				return fmt.Errorf("record: glibc's mtrace did not start: since glibc 2.34 it needs " +
					"libc_malloc_debug.so.0, and none was found in the system's library directories")
			}
			return fmt.Errorf("record: glibc's mtrace did not start, although %s was preloaded", mallocDebug())
		}
		return errNoCalls
	},
}

// mallocDebug returns the path of glibc's libc_malloc_debug.so.0 in the
// system's library directories (the multiarch one first), or "".
func mallocDebug() string {
	triplet := map[string]string{
		"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu", "386": "i386-linux-gnu",
		"riscv64": "riscv64-linux-gnu", "ppc64le": "powerpc64le-linux-gnu", "s390x": "s390x-linux-gnu",
	}[runtime.GOARCH]
	var dirs []string
	if triplet != "" {
		dirs = append(dirs, "/lib/"+triplet, "/usr/lib/"+triplet)
	}
	dirs = append(dirs, "/lib64", "/usr/lib64", "/lib", "/usr/lib")
	for _, d := range dirs {
		p := filepath.Join(d, "libc_malloc_debug.so.0")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// preload starts the LD_PRELOAD entry of a recorder's environment; see
// environ for how it meets the caller's own.
const preload = "LD_PRELOAD="

// notLoaded explains a run without logs from a recorder's preloaded
// library.
func notLoaded(lib string) error {
	return fmt.Errorf("%w: %s was never loaded into the program: LD_PRELOAD does not reach a statically "+
		"linked program (such as a Go binary built without cgo, which calls no C malloc) nor a setuid one", ErrNoEvents, lib)
}

// errNoCalls explains logs without events.
var errNoCalls = fmt.Errorf("%w: the program made no malloc calls", ErrNoEvents)
