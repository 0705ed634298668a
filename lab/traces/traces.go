// Package traces names the traces the lab replays: a TRACE argument is a
// file, the name of a trace shipped in the binary, or a generated trace
// (gen:NAME[:param=value,...]); Resolve reads one, and the Trace it
// returns opens afresh for each replay, so that replays run side by side;
// Trace.Spooled decodes it once for all of them (spool.go).
//
// The shipped traces let the lab run on a real program's trace with
// nothing to download: `carve` with no arguments replays them.
//
// The one trace today is Android's systemui process from start-up through
// starting and closing apps, recorded by the Android Open Source Project's
// memory_replay tool (786,454 lines: 383,154 malloc, 7,847 calloc, 1,066
// memalign, 29,167 realloc, 364,863 free and 357 thread_done; 770,279
// events once the frees of NULL and the thread ends are left out; a
// 32-bit process). It is distributed under the Apache License 2.0, Copyright (c)
// 2015 The Android Open Source Project; the notice travels with it in
// NOTICE-aosp-memory_replay.txt, and Notice returns it.
package traces

import (
	"bytes"
	_ "embed"
	"io"
	"strings"
)

var (
	//go:embed aosp-systemui.txt.gz
	systemui []byte
	//go:embed NOTICE-aosp-memory_replay.txt
	aospNotice string
)

// Shipped is one trace shipped in the binary.
type Shipped struct {
	// Name is how the lab's tables and the command line name the trace.
	Name string
	// File is the file name it was shipped as: its extensions say the
	// format and the compression.
	File string
	// About says what program the trace records, and how.
	About string
	// Notice is the license notice that must accompany the trace.
	Notice string

	data []byte
}

// Open returns the trace's file contents, compressed as File says
// (trace.NewReader decompresses them).
func (t Shipped) Open() io.Reader { return bytes.NewReader(t.data) }

// Size returns the bytes of the shipped (compressed) file.
func (t Shipped) Size() int { return len(t.data) }

// All returns the shipped traces.
func All() []Shipped {
	return []Shipped{{
		Name:   "aosp-systemui",
		File:   "aosp-systemui.txt.gz",
		About:  "Android's systemui process, start-up through starting and closing apps (AOSP memory_replay, 770,279 events)",
		Notice: aospNotice,
		data:   systemui,
	}}
}

// Lookup returns the shipped trace called name.
func Lookup(name string) (Shipped, bool) {
	for _, t := range All() {
		if t.Name == name {
			return t, true
		}
	}
	return Shipped{}, false
}

// Names returns the names of the shipped traces, comma-separated.
func Names() string {
	var names []string
	for _, t := range All() {
		names = append(names, t.Name)
	}
	return strings.Join(names, ", ")
}
