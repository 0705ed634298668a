// Package record runs a program and writes its allocation trace in carve's
// native format (package trace), for the lab to replay against every
// allocator. It is what carve record runs. See package lab for the
// lab's overview.
//
// [Record] runs the program under a recorder, a tool that sees its calls
// to the C allocator, then converts the recorder's log with the importer
// package trace has for that tool. No C recorder sees allocations that do
// not go through the C library's malloc: a Go program's heap, or Python's
// small objects unless it runs with PYTHONMALLOC=malloc. A Go program's
// heap is recorded from its execution trace instead (see Go programs).
//
// # Which programs each recorder sees
//
//	carve, valgrind,      a dynamically linked program's calls to the C
//	heaptrack, mtrace     library's malloc (C, C++, Python with
//	                      PYTHONMALLOC=malloc, a Go program's cgo part)
//	go                    a Go program's own heap: run by go test, a
//	                      running service (net/http/pprof), or a binary
//	                      that traces itself (package selftrace)
//
// A statically linked program (a Go binary built without cgo, a C program
// linked with -static) calls no malloc that LD_PRELOAD reaches.
//
// # Recorders
//
// carve (the default) is carve's own library, preloaded (LD_PRELOAD). Its
// C source, preload/carve.c, is embedded in this package and built at
// first use with the system's C compiler (cc, or $CC) into the user's
// cache directory, os.UserCacheDir()/carve/record-carve-<hash>.so, where
// later recordings find it. It defines malloc, free, calloc, realloc,
// reallocarray, memalign, posix_memalign, aligned_alloc, valloc and
// pvalloc; each calls the allocator's own (glibc's, or that of an
// allocator preloaded after it) and logs the call, with its thread, in
// Android's memory_replay text format, which trace's AOSP importer reads.
// It keeps everything: realloc whole, alignments, calloc's count,
// threads. A lock held around each call and its record puts the calls of
// all threads in one order, one in which they could have happened (a
// block's free comes before the allocation that reuses its address), at
// the cost of one lock per call: threads allocate one at a time. Records
// go straight into a shared mapping of the log file, whose pages outlive
// the process however it ends: a program ended by a signal (SIGKILL
// included), that replaces itself with exec or that ends by the
// exit_group system call (a Go program) loses at most the one record it
// was writing, which is left out ([Result].Cut says so). No signal
// handler is installed: programs that own their signals keep them. A log
// that cannot grow (a full disk) stops the recording of its process, and
// [Result].Stopped says so.
//
// carve's library also keeps each allocation's call stack (unless
// [Options].NoStacks, carve record --stacks=false): glibc's backtrace(),
// which unwinds by the binaries' .eh_frame tables (Debian builds without
// frame pointers), up to 8 return addresses past its own frames. Each
// distinct stack is written once ("stack <id> <return address>...") and
// an allocation's record ends with its number; the loaded binaries
// ("module <bias> <lo> <hi> <path>") are written when the log opens and
// again before the first stack after a dlopen. Converting the log, Record
// names each stack's innermost return address (package symbol: the
// binaries' symbol tables and DWARF, separate debug files included), and
// each allocation gets a label of no type whose site is that frame,
// "function (file.c:line)", "function (binary)" where the binary has no
// line table, "binary+0xoffset" where no symbol covers it: the function
// that called the allocator, as heaptrack's PEAK MEMORY CONSUMERS names
// it. [Result].CSites counts them, and the binaries whose symbols could
// not be read, with why (a stripped binary names its exported functions
// only; Debian's -dbg and -dbgsym packages install the rest). A program
// that allocates through a wrapper of its own (perl's
// Perl_safesysmalloc) has the wrapper as its site.
//
// valgrind runs the program on valgrind's emulated CPU with
// --trace-malloc=yes (under massif, which replaces malloc as memcheck does
// at half memcheck's cost). It keeps every call with its alignment and
// calloc's count, but not threads, and it is by far the slowest.
// Valgrind 3.20 and later print no result for posix_memalign and
// aligned_alloc: the importer counts those blocks as invisible. In a
// threaded program valgrind may switch threads between printing a call
// and its result; the result is then lost, the next call is printed on
// the same line, and the importer counts the block as invisible and reads
// on.
//
// heaptrack runs the program with heaptrack's own preloaded library, as
// heaptrack --raw does, and reads its raw data, call stacks included
// (named as carve's are, through its module records). It is fast, but records a
// realloc as a free and an allocation (the object changes ID), drops
// alignments and calloc's count, does not record memalign (version 1.4) or
// realloc(p, 0), and has no threads. (heaptrack 1.4 can hang a child
// that a threaded program forks, at the child's exit: Record then waits
// until its context is done.)
//
// mtrace is glibc's malloc tracing, which records nothing unless the
// program calls mtrace(): a second small library of carve's
// (preload/mtrace.c, built like the first) calls it from its constructor.
// Since glibc 2.34 mtrace lives in libc_malloc_debug.so.0, which Record
// finds in the system's library directories and preloads first. glibc
// logs calloc and the aligned allocations as plain allocations
// (alignments and calloc's count are lost) and has no threads; it logs a
// call after it returned, under its own lock, so in a threaded program an
// address may be logged allocated again before its free.
//
// go records the Go heap of a go test command, a running service or a
// binary that traces itself from its execution trace: see Go programs.
//
// [Recorders] describes each, and [Available] tells whether one can run
// here and, if not, what to install.
//
// # Cost
//
// Measured on the development machine (2 cores), python3 building a dict
// of 10000 strings with PYTHONMALLOC=malloc, about 223,000 calls; wall
// time of five runs each:
//
//	python3 alone                       0.10 s
//	under carve's library               0.14 to 0.18 s
//	Record, carve (run and convert)     0.16 to 0.23 s
//	Record, heaptrack                   0.42 to 0.72 s
//	Record, mtrace                      2.7 to 3.2 s
//	Record, valgrind (massif)           3.6 to 5.3 s (memcheck: 5.2 to 6.1 s of run alone)
//
// Those runs kept no call stack. With stacks, backtrace() is most of the
// cost: perl (Debian's, stripped) building a hash of 200,000 keys, some
// 800,000 calls, pinned to one core, medians of seven interleaved runs:
// 0.27 s alone, 0.40 s under carve's library without stacks (1.5×, as
// before stacks existed), 1.90 s with them (6.7×); the whole of Record,
// three runs each, medians: carve 2.54 s, carve without stacks 0.81 s,
// heaptrack (whose libunwind caches each frame's unwinding rule) 1.12 s.
//
// carve's lock is paid by threaded programs: eight threads making 2.8
// million calls ran in 0.22 s alone and 1.4 to 2.1 s recorded.
//
// # Go programs
//
// A command "go test [flags] [package]" (go, maybe -C DIR, then test) is
// recorded by the go recorder when the recorder asked for is the default
// or go (valgrind, heaptrack or mtrace is a usage error): Record adds GODEBUG=traceallocfree=1 to the environment (after any GODEBUG
// settings already there: the last setting of a name wins) and, unless
// the command has its own -trace FILE, -trace with a temporary file (a
// -trace FILE of the user's is never removed: one that is not a regular
// file is refused, and one that the run left as it was is no trace); it
// runs the command and converts the execution trace with package trace's
// Go importer to the native format of version 3, whose labels are the
// objects' types and whose "g" lines are the runtime's own heap metrics
// (also in [Result].GoHeap). What such a trace holds and loses is in
// package trace's documentation: no call stacks, deaths at sweep, tiny
// objects packed, sizes rounded to Go's size classes. go test -trace takes
// one package: a command that names several (go list counts them) is
// refused before it runs, with an error wrapping [ErrGoTestPackages], and
// so is go test -c, which runs nothing. Tests that fail still have their
// trace written (the error is an [*ExitError]).
//
// A running Go service is recorded by [FromService] (carve record --from
// URL --seconds N): it reads the service's /debug/pprof/trace, which a
// program serves when it imports net/http/pprof and serves HTTP with
// http.DefaultServeMux, and converts it as above. The service must run
// with GODEBUG=traceallocfree=1, which the runtime reads as each trace
// starts; a trace without the heap's events is refused with an error
// that says so. Starting the trace stops the world while the runtime
// writes a snapshot of the whole heap: an event for every object alive.
// The pause it records is in [Result].StartPause. Measured on the
// development machine (2 cores) on testdata/service: 0.8 to 1.3 ms for
// a heap of 5 MiB (14,000 to 19,000 objects), 14 to 17 ms for 65 MiB
// (220,000 to 360,000; once in six, 46 ms), 0.13 to 0.28 s for 530 to
// 605 MiB (2.6 to 3.4 million): about 50 ns an object. The time to stop
// the world, before it, is not in the trace. (The traces of go test and
// of a binary that traces itself record their pause too.)
// While the trace runs, every allocation and every sweep is an event:
// allocating a 48-byte object took 175 ns with the heap's events traced,
// 28.3 ns with a plain execution trace and 23.0 ns with none
// (BenchmarkAlloc in package selftrace, one core, the medians of six runs
// at a load of 1.8 on two cores).
//
// A Go binary that calls selftrace.Start (package
// github.com/carvelab/carve/lab/selftrace: defer selftrace.Start()() first
// in main) traces itself: Record knows it by its build information (built
// with carve's module) and its function table (selftrace's functions are
// in it: the linker keeps them only when the program calls one; the
// table survives stripping), runs it with the file its trace goes to in
// selftrace.Env and GODEBUG=traceallocfree=1, and converts the trace.
// It needs no recorder tool and is chosen for the default recorder and
// go. A binary that wrote no trace (it holds selftrace.Start but did not
// call it), an empty one (the trace did not start) or one cut short (it
// ended without stopping the trace: os.Exit, log.Fatal) gets an error
// wrapping [ErrSelftrace]; of one cut short, the events before the cut
// are written, as for any log that its importer cannot read to its end.
//
// Any other program is looked at first: a Go binary (known by its build
// information, debug/buildinfo) built without cgo is not run, and Record's
// error wraps [ErrGoProgram] and says how a Go program is recorded. A Go
// binary built with cgo is recorded by the C recorder asked for; its trace
// holds only its C heap, and says so in its first lines and in
// [Result].CHeapOnly (with nothing recorded, the error wraps ErrGoProgram
// too). The errors that
// wrap [ErrUsage] are a command that cannot be recorded as given, or a
// service that cannot be recorded as asked ([ErrService]): carve's
// command line exits with status 2 on them.
//
// # Processes: fork and exec
//
// A recorded program may be a wrapper: a shell running it (sh -c, a
// script, pyenv's python3, which is a bash script), env, time. So carve's
// library logs every process on its own: each process that loads it (the
// variable CARVE_RECORD_DIR and LD_PRELOAD are inherited) writes its own
// log, a forked child from the fork on and a program that replaces itself
// with exec from the exec on. Record converts the busiest log (the most
// lines), which is the real program behind a wrapper, and lists the other
// processes in [Result]. The same holds for valgrind (--trace-children=yes:
// each process, and a program exec'd from it in the same process, which
// replaces its log) and for mtrace, except that mtrace does not record
// forked children. heaptrack records the first program only: it takes
// itself out of the environment, and a program that execs another loses
// the data heaptrack had buffered, so record the program itself, not a
// wrapper.
//
// # The result
//
// A program that exits with a status other than 0 still has its trace
// written; Record's error is then an [*ExitError]. A program that made no
// allocation the recorder saw (a statically linked program, which
// LD_PRELOAD does not reach) gets nothing written and an error wrapping
// [ErrNoEvents]. The trace starts with comment lines naming the command
// and the process kept; its events carry the recorded thread ids (carve's
// recorder) or 0. The replayer replays a multi-threaded trace in its
// recorded order, on one thread.
//
// While the program runs, Record reads the VmRSS and VmHWM of its
// processes (/proc/PID/status, Linux only) every [RSSEvery] (and the
// started process's peak once more from its exit status), and writes
// those of the process the trace is of as the trace's "R" lines
// ([Result].ProcessRSS; see trace.ProcessRSS): of the test binary of a
// go test run and of a binary that traces itself, placed among the
// events by the execution trace's clock; of a C recorder's process (for
// valgrind, valgrind's own, the program inside it), the peak only, in a
// trace of version 3 without labels, since its log has no clock. A
// service's trace ([FromService]) has none; [Result].NoRSS says why a
// trace has none.
package record
