// Package traces holds the allocation traces carve ships in its binary,
// so that the lab runs on a real program's trace with nothing to
// download: `carve` with no arguments replays them.
//
// The one trace today is Android's systemui process from start-up through
// starting and closing apps, recorded by the Android Open Source Project's
// memory_replay tool (786,454 events: 383,154 malloc, 7,847 calloc, 1,066
// memalign, 29,167 realloc, 364,863 free, 357 thread_done; a 32-bit
// process). It is distributed under the Apache License 2.0, Copyright (c)
// 2015 The Android Open Source Project; the notice travels with it in
// NOTICE-aosp-memory_replay.txt, and Notice returns it.
package traces

import (
	"bytes"
	_ "embed"
	"io"
)

var (
	//go:embed aosp-systemui.txt.gz
	systemui []byte
	//go:embed NOTICE-aosp-memory_replay.txt
	aospNotice string
)

// Trace is one shipped trace.
type Trace struct {
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
func (t Trace) Open() io.Reader { return bytes.NewReader(t.data) }

// Size returns the bytes of the shipped (compressed) file.
func (t Trace) Size() int { return len(t.data) }

// All returns the shipped traces.
func All() []Trace {
	return []Trace{{
		Name:   "aosp-systemui",
		File:   "aosp-systemui.txt.gz",
		About:  "Android's systemui process, start-up through starting and closing apps (AOSP memory_replay, 786,454 events)",
		Notice: aospNotice,
		data:   systemui,
	}}
}

// Lookup returns the shipped trace called name.
func Lookup(name string) (Trace, bool) {
	for _, t := range All() {
		if t.Name == name {
			return t, true
		}
	}
	return Trace{}, false
}
