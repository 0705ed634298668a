package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/carvelab/carve/lab/diff"
	"github.com/carvelab/carve/lab/trace"
)

// writeGoTrace writes a native trace of a Go program: n objects of each
// (type, size), live to the end, a collection there and the program's
// RSS.
func writeGoTrace(t *testing.T, path string, hwm uint64, types map[string][2]uint64) {
	t.Helper()
	var b bytes.Buffer
	labels := new(trace.Labels)
	w := trace.NewWriter(&b)
	if err := w.SetLabels(labels); err != nil {
		t.Fatal(err)
	}
	id, live := uint64(0), uint64(0)
	for _, name := range []string{"uint8", "main.Entry", "main.pool"} {
		nsize, ok := types[name]
		if !ok {
			continue
		}
		typeSize := map[string]string{"uint8": "1", "main.Entry": "64", "main.pool": "65536"}[name]
		l, err := labels.Intern(trace.Label{Name: name, Attrs: []trace.Attr{{Key: trace.AttrSize, Value: typeSize}}})
		if err != nil {
			t.Fatal(err)
		}
		for range nsize[0] {
			id++
			live += nsize[1]
			if err := w.Write(trace.Event{Op: trace.Alloc, ID: id, Size: nsize[1], Label: l}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.GoCycle(trace.GoCycle{Start: int64(id), End: int64(id), Marked: live}); err != nil {
		t.Fatal(err)
	}
	if err := w.ProcessRSS(trace.ProcessRSS{Event: -1, RSS: hwm, HWM: hwm, Of: trace.RSSTestBinary}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDiff runs carve diff on two traces and on two replay tables, in
// text and JSON, and on the inputs it refuses: each refusal is one line
// naming the input, exit code 2, and no input is changed.
func TestDiff(t *testing.T) {
	dir := t.TempDir()
	before, after := filepath.Join(dir, "before.trace"), filepath.Join(dir, "after.trace")
	writeGoTrace(t, before, 300<<20, map[string][2]uint64{"uint8": {100, 2 << 20}, "main.Entry": {1000, 64}})
	writeGoTrace(t, after, 210<<20, map[string][2]uint64{"uint8": {1, 1 << 20}, "main.Entry": {1000, 64}, "main.pool": {4, 64 << 10}})
	replayA, replayB := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	for path, rss := range map[string]string{replayA: "2000", replayB: "1000"} {
		doc := `{"schema": "` + "carve.replay/v4" + `", "rows": [{"trace": "conn.txt", "allocator": "glibc", "peak_rss": ` + rss + `, "peak_live": 900}]}`
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	advise := filepath.Join(dir, "advise.json")
	if err := os.WriteFile(advise, []byte(`{"schema": "carve.advise/v1"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage.trace")
	if err := os.WriteFile(garbage, []byte("not a trace\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inputs := map[string][]byte{}
	for _, p := range []string{before, after, replayA, replayB, advise, garbage} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		inputs[p] = b
	}
	missing := filepath.Join(dir, "missing.trace")
	tests := []struct {
		name string
		args []string
		code int
		want []string // in stdout for exit 0, in the one line of stderr otherwise
	}{
		{"traces", []string{before, after}, 0, []string{
			"the program's peak RSS (VmHWM)  300.00 MiB  210.00 MiB  -90.00 MiB  -30%",
			"- 256.0 KiB +256.0 KiB new - 4 - 4 main.pool\n",
			"verdict: the program's peak RSS 300.00 MiB -> 210.00 MiB, -30%; the []byte at the trace's peak 200.00 MiB -> 1.00 MiB: it left the Go heap"}},
		{"traces, json", []string{"--format", "json", before, after}, 0, []string{`"schema": "carve.diff/v1"`, `"kind": "traces"`, `"by": "type"`, `"key": "[]byte"`}},
		{"replays", []string{replayA, replayB}, 0, []string{"rows matched by trace and allocator", "conn.txt glibc 2.0 KiB 1000 B -1000 B -50% 900 B 900 B 0 B\n"}},
		{"replays, json", []string{replayA, replayB, "--format", "json"}, 0, []string{`"kind": "replay"`, `"matched_by": "trace and allocator"`}},
		{"a mix", []string{replayA, after}, 2, []string{replayA + " is JSON (a carve replay table) and " + after + " a trace: compare two of a kind"}},
		{"a mix, the other way", []string{before, replayB}, 2, []string{replayB + " is JSON"}},
		{"a missing file", []string{before, missing}, 2, []string{missing + ": no such file"}},
		{"a missing file beside JSON", []string{replayA, missing}, 2, []string{missing + ": no such file"}},
		{"a file that is not a trace", []string{before, garbage}, 2, []string{garbage}},
		{"JSON of another schema", []string{advise, replayB}, 2, []string{advise + ": JSON of schema carve.advise/v1"}},
		{"one argument", []string{before}, 2, []string{"want two arguments"}},
		{"a bad format", []string{"--format", "csv", before, after}, 2, []string{`--format "csv"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"diff"}, tc.args...), &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("carve diff %s: exit %d, want %d; stderr:\n%s", strings.Join(tc.args, " "), code, tc.code, stderr.String())
			}
			out := spaced(stdout.String())
			if code != 0 {
				out = spaced(stderr.String())
				lines := strings.Split(strings.TrimSpace(out), "\n")
				if n := len(lines); n != 1 && !(n == 2 && strings.HasPrefix(lines[1], "run 'carve help diff'")) {
					t.Errorf("carve diff %s: stderr %q, want one line (and the way to the help)", strings.Join(tc.args, " "), out)
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(out, spaced(w)) {
					t.Errorf("carve diff %s: no %q in\n%s", strings.Join(tc.args, " "), w, out)
				}
			}
			if slices.Contains(tc.args, "json") && code == 0 {
				var doc struct{ Schema string }
				if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil || doc.Schema != diff.Schema {
					t.Errorf("carve diff --format json: schema %q, %v", doc.Schema, err)
				}
			}
		})
	}
	for p, b := range inputs {
		if now, err := os.ReadFile(p); err != nil || !bytes.Equal(now, b) {
			t.Errorf("%s changed (%v)", p, err)
		}
	}
}

// spaced is s with every run of spaces one space, and none at a line's
// start, for comparing tables.
func spaced(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString(strings.Join(strings.Fields(line), " "))
		if strings.HasSuffix(line, "\n") {
			b.WriteByte('\n')
		}
	}
	return b.String()
}
