package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carvelab/carve/lab/trace"
)

// TestMaxGoGeneration checks that every command that reads traces takes
// --max-go-generation, and that a generation past it stops the command
// with an error naming the flag (the go row's child reads it too): the
// golden Go trace's one generation is counted at 287 KB.
func TestMaxGoGeneration(t *testing.T) {
	dir := t.TempDir()
	flag := "--" + trace.MaxGoGenerationFlag
	for _, args := range [][]string{
		{"stats"},
		{"convert", "-o", filepath.Join(dir, "out.trace")},
		{"replay", "--alloc", "first-fit,go", "--progress=false"},
		{"report", "-o", filepath.Join(dir, "out.html"), "--alloc", "first-fit", "--progress=false"},
		{"advise", "--repeats", "1", "--types", "1"},
	} {
		var stdout, stderr bytes.Buffer
		low := append(append([]string{}, args...), flag, "100KiB", goTrace)
		if code := run(low, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), flag+" raises the bound") {
			t.Errorf("run(%q) = %d, printed %q; want 2 and an error naming %s", low, code, stderr.String(), flag)
		}
		if args[0] == "replay" && strings.Count(stdout.String()+stderr.String(), "raises the bound") < 3 {
			t.Errorf("run(%q) printed %q: want the error of both rows", low, stdout.String()+stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"stats", flag, "1MiB", goTrace}, &stdout, &stderr); code != 0 {
		t.Errorf("stats %s 1MiB: exit %d: %s", flag, code, stderr.String())
	}
}
