package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestNamesBeforeReplay: an unknown type, a pool size no request of the
// trace has or that pool.New refuses, and an unknown allocator are
// refused before any replay, at once, in one line and with exit 2, by
// carve replay and carve report (which share the flags); a misspelt
// name gets the nearest of the trace's own.
func TestNamesBeforeReplay(t *testing.T) {
	const gen = "gen:connection:n=200"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--pool", "type=nosuch", goTrace}, `no type "nosuch" in ` + goTrace + " (carve stats lists its types)"},
		{[]string{"--heap", "type=main.sesion", goTrace}, `no type "main.sesion" in ` + goTrace + "; did you mean main.session?"},
		{[]string{"--arena", "type=[]bytes", goTrace}, "did you mean []byte?"},
		{[]string{"--pool", "type=main.session", gen}, `no type "main.session" in ` + gen + ": its events carry no labels"},
		{[]string{"--pool", "1000", gen}, "no request of " + gen + " is of 1000 bytes; the nearest it has: 1024"},
		{[]string{"--heap", "1000", gen}, "no request of " + gen + " is of 1000 bytes"},
		{[]string{"--pool", "4", gen}, "--pool 4: pool: bad chunk size"},
		{[]string{"--pool", "64,64", gen}, "size 64 given twice"},
		{[]string{"--alloc", "glibcc", gen}, `unknown allocator "glibcc"`},
		{[]string{"--alloc", "best-fti", gen}, "did you mean best-fit?"},
	} {
		for _, cmd := range []string{"replay", "report"} {
			args := append([]string{cmd}, tc.args...)
			if cmd == "report" {
				args = append(args, "-o", filepath.Join(t.TempDir(), "r.html"))
			}
			var stdout, stderr bytes.Buffer
			start := time.Now()
			code := run(args, &stdout, &stderr)
			took := time.Since(start)
			lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
			if code != 2 || len(lines) != 1 || !strings.Contains(lines[0], tc.want) || stdout.Len() != 0 {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2, nothing on stdout and one line with %q", args, code, stdout.String(), stderr.String(), tc.want)
			}
			if took > time.Second && !raceEnabled {
				t.Errorf("%v: refused after %v, want under a second", args, took)
			}
			if cmd == "report" {
				if _, err := os.Stat(args[len(args)-1]); err == nil {
					t.Errorf("%v: a report written", args)
				}
			}
		}
	}
}

// TestGoNames: every spelling of a []byte routes its objects, and the
// row names it []byte; a struct's route reads as the trace names it.
func TestGoNames(t *testing.T) {
	var names []string
	for _, spelling := range []string{"[]byte", "[]uint8", "uint8"} {
		rs := replayRows(t, "replay", "--alloc", "first-fit", "--heap", "type="+spelling, "--format", "json", goTrace)
		for _, r := range rs {
			if r.Error != "" {
				t.Errorf("--heap type=%s: row %s: %s", spelling, r.Allocator, r.Error)
			}
		}
		names = append(names, rs[len(rs)-1].Allocator)
	}
	if want := slices.Repeat([]string{"first-fit+heap(type=[]byte)"}, 3); !slices.Equal(names, want) {
		t.Errorf("rows %q, want %q", names, want)
	}
	rs := replayRows(t, "replay", "--alloc", "first-fit", "--pool", "type=main.session", "--pool", "64", "--format", "json", goTrace)
	if got := rs[len(rs)-1]; got.Allocator != "first-fit+pool(64)+pool(type=main.session)" || got.Routed == nil || got.Routed.Allocs == 0 {
		t.Errorf("row %s, routed %+v: want first-fit+pool(64)+pool(type=main.session), with what its routes held", got.Allocator, got.Routed)
	}
}
