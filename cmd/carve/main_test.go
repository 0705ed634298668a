package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestDemo(t *testing.T) {
	var out bytes.Buffer
	if err := demo(&out, demoConfig{connections: 2000, persons: 10000}); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"fifth is null: 1, distinct: 1",
		"freed chunk reused: 1",
		"pool(16, align 8): two chunks 16 bytes apart, 16 usable",
		"pool(40, align 16): two chunks 48 bytes apart, 40 usable, 8 bytes per chunk lost to alignment",
		"pool: next buffers of 1024 B: RSS after setup",
		"pool: next buffers of 4096 B: RSS after setup",
		"int variable: 42",
		"user id: 101, name: ABCxyz",
		"bump allocator: 10000 Person",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"help", []string{"help"}, 0, "Usage:"},
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"demo with an argument", []string{"demo", "extra"}, 2, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, &stdout, &stderr); code != tt.code {
				t.Errorf("run(%q) = %d, want %d", tt.args, code, tt.code)
			}
			if got := stdout.String() + stderr.String(); !strings.Contains(got, tt.out) {
				t.Errorf("run(%q) printed %q, want it to contain %q", tt.args, got, tt.out)
			}
		})
	}
}

func TestLabCommands(t *testing.T) {
	dir := t.TempDir()
	gen := dir + "/conn.txt"
	conv := dir + "/conv.txt"
	var stdout, stderr bytes.Buffer
	steps := []struct {
		name string
		args []string
		code int
		out  string // a part of standard output, or of standard error when code != 0
	}{
		{"gen", []string{"gen", "connection", "next=4096", "n=500", "-o", gen}, 0, ""},
		{"gen unknown", []string{"gen", "nosuch"}, 2, `unknown generator "nosuch"`},
		{"gen bad parameter", []string{"gen", "connection", "bogus=1"}, 2, `no parameter "bogus"`},
		{"convert", []string{"convert", "-o", conv, gen}, 0, ""},
		{"convert missing file", []string{"convert", dir + "/nosuch"}, 2, "no such file"},
		{"stats", []string{"stats", conv}, 0, "peak live: 2080000 B in 1000 objects"},
		{"replay", []string{"replay", "--alloc", "first-fit,buddy-header,sizeclass", gen}, 0, "buddy-header"},
		{"replay with a pool", []string{"replay", "--alloc", "first-fit", "--pool", "1024", gen}, 0, "first-fit+pool(1024)"},
		{"replay unknown allocator", []string{"replay", "--alloc", "nosuch", gen}, 2, "unknown allocator"},
		{"replay no trace", []string{"replay"}, 2, "want at least one TRACE"},
		{"replay as json", []string{"replay", "--alloc", "best-fit", "--format", "json", gen}, 0, `"schema": "carve.replay/v1"`},
		{"replay as markdown", []string{"replay", "--alloc", "best-fit", "--format", "markdown", gen}, 0, "| best-fit |"},
		{"replay as csv", []string{"replay", "--alloc", "best-fit", "--format", "csv", gen}, 0, ",best-fit,"},
		{"replay bad format", []string{"replay", "--format", "xml", gen}, 2, `--format "xml"`},
	}
	for _, s := range steps {
		stdout.Reset()
		stderr.Reset()
		code := run(s.args, &stdout, &stderr)
		got := stdout.String()
		if s.code != 0 {
			got = stderr.String()
		}
		if code != s.code || !strings.Contains(got, s.out) {
			t.Fatalf("%s: run(%q) = %d, printed %q; want %d and %q", s.name, s.args, code, got, s.code, s.out)
		}
		if strings.Contains(strings.Join(s.args, " "), "json") && code == 0 {
			var doc struct {
				Schema string `json:"schema"`
				Rows   []struct {
					Allocator     string   `json:"allocator"`
					PeakLive      int64    `json:"peak_live"`
					PeakFootprint int64    `json:"peak_footprint"`
					Fragmentation *float64 `json:"fragmentation_percent_at_end"`
				} `json:"rows"`
			}
			if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
				t.Fatalf("%s: output is not JSON: %v", s.name, err)
			}
			if len(doc.Rows) != 1 || doc.Rows[0].PeakLive != 2080000 || doc.Rows[0].PeakFootprint < doc.Rows[0].PeakLive || doc.Rows[0].Fragmentation == nil {
				t.Errorf("%s: rows %+v, want one best-fit row with peak live 2080000 <= peak footprint and a fragmentation", s.name, doc.Rows)
			}
		}
	}
}
