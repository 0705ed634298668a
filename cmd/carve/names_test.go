package main

import (
	"bytes"
	"fmt"
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

// cSitesTrace writes a C program's trace whose labels are allocation
// sites of no type, as carve's recorder writes them: make_node's 48-byte
// blocks, make_name's of 32 to 40 bytes, half of each freed.
func cSitesTrace(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("# carve trace v2\nl 1 \"\" site=\"make_node (prog.c:6)\"\nl 2 \"\" site=\"make_name (prog.c:7)\"\n")
	id := 0
	for i := range 2000 {
		id++
		fmt.Fprintf(&b, "a %d 48 @1\n", id)
		id++
		fmt.Fprintf(&b, "a %d %d @2\n", id, 32+i%9)
		if i%2 == 1 {
			fmt.Fprintf(&b, "f %d\nf %d\n", id-3, id-2)
		}
	}
	path := filepath.Join(t.TempDir(), "c.trace")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCSiteRoutes: a C program's sites route its objects (site= alone),
// a type asked of it says that its labels are sites of no type, and a
// misspelt site gets the nearest.
func TestCSiteRoutes(t *testing.T) {
	tr := cSitesTrace(t)
	rs := replayRows(t, "replay", "--alloc", "first-fit", "--pool", "site=make_node", "--format", "json", tr)
	if len(rs) != 2 || rs[1].Allocator != "first-fit+pool(site=make_node)" || rs[1].Error != "" || rs[1].PeakFootprint >= rs[0].PeakFootprint {
		t.Errorf("rows %+v, want first-fit and first-fit+pool(site=make_node), the pool's footprint lower", rs)
	}
	for _, tc := range []struct{ arg, want string }{
		{"type=main.node", `no type "main.node" in ` + tr + ": its labels are a C program's allocation sites, of no type"},
		{"site=make_nodes", `no site "make_nodes" in ` + tr + "; did you mean make_node?"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{"replay", "--pool", tc.arg, tr}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("--pool %s: exit %d, stderr %q; want exit 2 and %q", tc.arg, code, stderr.String(), tc.want)
		}
	}
}

// TestCStats: carve stats lists a C program's objects by site by
// default, and --by type says the trace has no types.
func TestCStats(t *testing.T) {
	tr := cSitesTrace(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"stats", tr}, "make_node (prog.c:6)"},
		{[]string{"stats", "--by", "type", tr}, "types: none (a C program's trace"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), tc.want) {
			t.Errorf("carve %v: exit %d, stdout %q, stderr %q; want %q", tc.args, code, stdout.String(), stderr.String(), tc.want)
		}
	}
}
