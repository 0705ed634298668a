// Package lab is carve's fragmentation lab: it records the allocation
// trace of a program, replays it through many allocators (carve's own
// heaps and the real mallocs: glibc, jemalloc, tcmalloc, mimalloc, and
// the Go heap), and shows side by side how far each heap grows beyond the
// memory the program really holds, over time, and why. It is the method of
// the FREENIX paper (Bohra and Gabber, "Are Mallocs Free of
// Fragmentation?", 2001): the same trace through many mallocs, each
// treated as a black box and measured by its heap against live memory.
// This file is the lab's overview; the library it measures is described
// in the carve package (the module's root), with the sources both are
// built on.
//
// # The packages
//
//	trace    the event model (alloc, calloc, memalign, realloc, free on
//	         object IDs, each object with an optional label: a Go type)
//	         and its formats, carve's native one, the C recorders' logs
//	         and Go execution traces (trace.Formats, which carve help
//	         lists); gzip and zstd
//	trace/gen  the generators of the block-allocator article's scenarios
//	         and of synthetic workloads (carve gen)
//	trace/summary  a trace described before any replay: sizes,
//	         lifetimes, peak live, Robson's bounds, its types and sites
//	         by their bytes at the peak (carve stats)
//	traces   the traces shipped in the binary, and Resolve, which turns a
//	         TRACE argument (a file, a shipped name, gen:NAME[:k=v,...])
//	         into a trace any number of replays can open
//	replay   drives one allocator with one trace and measures it: Run in
//	         process, RunBatch a batch at a time (the C allocators); one
//	         ledger keeps the books for both
//	rows     the rows of the lab's tables: the allocators a row can
//	         replay (one table of them, replay's heaps and the real
//	         mallocs), each row run in this process or a child of its
//	         own, under one memory budget
//	libc     the C mallocs, whichever is preloaded: named, measured, and
//	         driven a batch of ops at a time, in this process (cgo) or
//	         in a plain C process of their own (the real mallocs' rows)
//	record   runs a program under a recorder (carve's LD_PRELOAD library,
//	         valgrind, heaptrack, mtrace for C; for a Go program's own
//	         heap, with its types, its execution trace: go test -trace,
//	         a binary built with selftrace, or a running service's
//	         /debug/pprof/trace) and writes its trace
//	symbol   names the code addresses of a C program's call stacks,
//	         from its binaries, after the run
//	selftrace  the call a Go binary makes first in main so that carve
//	         record can trace it (nothing without carve)
//	report   the HTML report: the headline and its verdict, charts over
//	         time, the fragmentation bars, the trace's histograms, the
//	         table, the heap maps, a Go program's types and own heap
//	advise   which dedicated pools would lower a heap's peak, or which
//	         of a Go program's types to move off the Go heap, found by
//	         replaying candidates
//	diff     two traces of a program compared, before and after a
//	         change (peak live, the marked heap, the program's RSS, per
//	         type), with a verdict; or two tables of rows, row by row
//	scenario the block-allocator article's experiments and the bump
//	         benchmark, a line per allocator in the sources' words, from
//	         one table (carve help scenario lists them); carve demo's
//	         demonstrations
//
// The carve command (cmd/carve) is the lab's command line.
//
// # A trace
//
// A trace is a sequence of events on object IDs, not addresses: the
// importers map the addresses a recorded program got to IDs (an address
// names a new object once it is freed and handed out again). Replay is
// single-threaded: a multi-threaded recording is replayed in its recorded
// order on one OS thread. An event that does not fit the objects alive at
// its point (a free of an object never allocated or already freed, an
// allocation reusing a live ID, an impossible size) is a trace error:
// counted, the first one kept, and skipped (or fatal with --strict).
//
// # The measures
//
// For each trace and allocator the replayer keeps live memory (the bytes
// the trace asked for and has not freed) exactly after every event, the
// allocator's footprint (the bytes it committed from the OS and has not
// given back) after every event for carve's heaps and at every sample for
// the others, and its resident memory at samples. From these:
//
//   - peak live and peak footprint, and their ratio, Johnstone and
//     Wilson's measure #4 ("The Memory Fragmentation Problem: Solved?",
//     ISMM 1998); their #1 (footprint over live, summed over the trace),
//     #2 (at the peak of live memory) and #3 (at the peak of the
//     footprint) in the JSON;
//   - the FREENIX paper's fragmentation, 100 × (footprint / live - 1),
//     at the end of the trace;
//   - peak resident memory (RSS);
//   - for a generated scenario, the footprint and resident memory at the
//     end of each of its phases: the article's lessons are in how much
//     the heap grows in the last one;
//   - the cost of the allocator's calls, in nanoseconds per call;
//   - the trace's errors.
//
// # How each row is measured
//
// carve's heaps (the rows of replay.Rows but the Go heap; carve help replay
// lists every row with a line on what it is) are replayed in the lab's own
// process (replay.Run): the footprint is their own exact figure, read after
// every event, and resident memory is the pages of their regions in RAM
// (mincore). With --isolate they run in children too, and their resident
// memory is then measured as the real mallocs' is. Every block they hand out
// is checked (unless --nocheck): inside the heap's memory, aligned as asked,
// overlapping no other live block, and the pattern written into it (every
// byte of a block of up to 64 bytes, else its first and last 8) intact until
// it is freed.
//
// The real mallocs are measured as the FREENIX paper measured its nine,
// as black boxes, each in a process of its own, and a plain C one: a Go
// process is not what a C program sees (its runtime's threads, cgo's
// start-up and its earlier mallocs change the allocator's state and the
// process's baseline). carve builds a small C replayer with the system's
// C compiler (libc.Replayer) and starts it with LD_PRELOAD naming the
// library (glibc, the process's own, needs none); the replayer confirms
// which malloc really serves it (the loader ignores a library it cannot
// find, with only a line on standard error), and carve reads the trace
// and sends it the events a batch at a time (replay.RunBatch). After each
// batch the replayer reports the allocator's own statistic and its RSS.
// All are above its baseline, taken after the allocator's first request
// (free(malloc(1))) and before event 0: the footprint is the allocator's
// statistic less its value there (and never less than the growth of its
// count of the bytes in use), and the resident memory the process's peak
// RSS since the previous batch (the kernel's high-water mark, reset at
// each report, or the anonymous RSS when it reads more) above the
// baseline, less the replayer's slot table. Its start-up figures are
// kept in fields of their own.
//
// The Go heap (the go row) is replayed in a child, carve started again,
// its runtime statistics being process-wide: each block is a
// make([]byte), its footprint is the runtime's own figure of the heap it
// maps (above its figure before the replay), and its resident memory the
// child's anonymous RSS above the baseline. Its collections run where
// the row's GOGC aims them (replay.NewGoHeap: a full collection when the
// heap's objects reach live × (1 + GOGC/100)), so that the row is the
// same from run to run.
//
// carve decodes each trace once per run (traces.Trace.Spooled) and every
// row reads the decoded events: the rows in carve's process and the C
// replayers from its temporary file, the go row's and isolated rows'
// children on their standard input. The rows running at once share one
// memory budget, half the physical memory, each reserving what it may
// hold before it starts (see package rows).
//
// Every byte of every block is written (unless --touch=false), as a
// program would write it, so that resident memory counts the pages a
// program would have touched. Every allocator call is timed on its own,
// in Go (replay.Run: carve's heaps and the Go heap) and in C (the real
// mallocs), the time its thread was off the CPU taken off (see
// replay.CheckAfter); the writes are not timed.
//
// See carve's README for the command line, and docs/json.md for the
// schema of its JSON output.
package lab
