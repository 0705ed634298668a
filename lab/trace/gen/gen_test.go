package gen

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/carvelab/carve/internal/text"
	"github.com/carvelab/carve/lab/trace"
)

// counter is an EventWriter that checks, counts and summarizes, keeping
// nothing per event but the live objects; a light counter (nil map) keeps
// nothing at all, and its peak is what was allocated before the first
// free.
type counter struct {
	ops       [trace.NumOps]int64
	live      map[uint64]uint64
	peak, cur uint64
	errs      int
	freed     bool
}

func newCounter() *counter { return &counter{live: map[uint64]uint64{}} }

// valid is a Writer that writes nowhere: it refuses an event of the wrong
// form, as Reader and Writer do.
var valid = trace.NewWriter(io.Discard)

func (c *counter) Write(e trace.Event) error {
	if err := valid.Write(e); err != nil {
		return err
	}
	c.ops[e.Op]++
	if c.live == nil {
		if e.Op == trace.Alloc && !c.freed {
			c.cur += e.Size
			c.peak = c.cur
		}
		c.freed = c.freed || e.Op == trace.Free
		return nil
	}
	switch e.Op {
	case trace.Alloc:
		if _, ok := c.live[e.ID]; ok {
			c.errs++
		}
		c.live[e.ID] = e.Size
		c.cur += e.Size
	case trace.Free:
		size, ok := c.live[e.ID]
		if !ok {
			c.errs++
		}
		delete(c.live, e.ID)
		c.cur -= size
	default:
		c.errs++
	}
	c.peak = max(c.peak, c.cur)
	return nil
}

// TestGeneratorCounts runs each generator with its defaults and checks
// the counts the article gives.
func TestGeneratorCounts(t *testing.T) {
	tests := []struct {
		name          string
		args          Args
		allocs, frees int64
		peak, end     uint64 // live bytes; 0: not checked
	}{
		{"connection", nil, 300000, 100000, 100000 * (1024 + 64), 100000 * (1024 + 64)},
		{"connection", Args{"next": 4096}, 300000, 100000, 100000 * (4096 + 64), 100000 * (4096 + 64)},
		{"carving", nil, 400000, 100000, 100000 * (1024 + 64 + 200), 100000 * (1024 + 64 + 200)},
		{"carving", Args{"smalls": 0}, 300000, 100000, 100000 * (1024 + 64), 100000 * (1024 + 64)},
		{"bump", nil, 5000000, 5000000, 5000000 * 36, 0},
		{"bump", Args{"free": 0, "n": 10}, 10, 0, 360, 360},
		{"zipf", nil, 1000000, 0, 0, 0},
		{"zipf", Args{"n": 100000, "life": 100}, 100000, 0, 0, 0},
		{"phases", nil, 200000, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if raceEnabled && tt.allocs > 100000 {
				t.Skip("big run: checked without the race detector")
			}
			g, ok := Lookup(tt.name)
			if !ok {
				t.Fatalf("no generator %q", tt.name)
			}
			c := newCounter()
			if tt.allocs >= 1e6 {
				c = &counter{} // light: the small runs check the IDs
			}
			if err := g.Generate(c, tt.args); err != nil {
				t.Fatal(err)
			}
			if c.errs != 0 {
				t.Errorf("%d events on dead or live IDs, or not allocs and frees", c.errs)
			}
			if c.ops[trace.Alloc] != tt.allocs || tt.frees != 0 && c.ops[trace.Free] != tt.frees {
				t.Errorf("%d allocs, %d frees, want %d and %d", c.ops[trace.Alloc], c.ops[trace.Free], tt.allocs, tt.frees)
			}
			if tt.peak != 0 && c.peak != tt.peak {
				t.Errorf("peak live %d, want %d", c.peak, tt.peak)
			}
			if tt.end != 0 && c.cur != tt.end {
				t.Errorf("live at the end %d, want %d", c.cur, tt.end)
			}
		})
	}
}

var update = flag.Bool("update", false, "rewrite the golden traces under testdata/")

// genGoldens are small instances of each generator, kept as golden
// traces under testdata (go test ./lab/trace/gen -update rewrites them).
var genGoldens = []struct {
	file string
	name string
	args Args
}{
	{"connection-next4096.trace", "connection", Args{"n": 3, "next": 4096}},
	{"carving-smalls1.trace", "carving", Args{"n": 3}},
	{"carving-smalls0.trace", "carving", Args{"n": 3, "smalls": 0}},
	{"bump.trace", "bump", Args{"n": 4}},
	{"zipf-seed1.trace", "zipf", Args{"n": 40, "life": 5, "max": 1024}},
	{"zipf-seed2.trace", "zipf", Args{"n": 40, "life": 5, "max": 1024, "seed": 2}},
	{"phases-seed1.trace", "phases", Args{"n": 10, "phases": 3, "life": 3, "keep": 0.2}},
	{"randfree-seed1.trace", "randfree", Args{"n": 10, "min": 16, "max": 64}},
}

// TestGeneratorGolden checks small instances against their golden
// traces: the same arguments give the same trace, on any machine.
func TestGeneratorGolden(t *testing.T) {
	for _, gg := range genGoldens {
		t.Run(gg.file, func(t *testing.T) {
			g, _ := Lookup(gg.name)
			var b bytes.Buffer
			w := trace.NewWriter(&b)
			if err := g.Generate(w, gg.args); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", gg.file)
			if *update {
				os.MkdirAll(filepath.Dir(path), 0o755)
				if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./lab/trace/gen -update to write it)", err)
			}
			if !bytes.Equal(b.Bytes(), want) {
				t.Errorf("%s(%v) differs from %s:\n%s", gg.name, gg.args, path, text.FirstDiff(string(want), b.String()))
			}
		})
	}
}

// TestGeneratorSeeds: a seed names a trace; another seed, another trace.
func TestGeneratorSeeds(t *testing.T) {
	for _, name := range []string{"zipf", "phases"} {
		g, _ := Lookup(name)
		gen := func(seed float64) string {
			var b bytes.Buffer
			w := trace.NewWriter(&b)
			if err := g.Generate(w, Args{"seed": seed, "n": 500}); err != nil {
				t.Fatal(err)
			}
			w.Flush()
			return b.String()
		}
		first, again, other := gen(3), gen(3), gen(4)
		if first != again {
			t.Errorf("%s: seed 3 twice gives two traces", name)
		}
		if first == other {
			t.Errorf("%s: seeds 3 and 4 give the same trace", name)
		}
	}
}

// TestGeneratorArgs checks argument checking and parsing.
func TestGeneratorArgs(t *testing.T) {
	g, _ := Lookup("connection")
	for _, args := range []Args{{"nxt": 4096}, {"next": -1}, {"next": 1.5}, {"n": 2e9}} {
		if err := g.Generate(newCounter(), args); err == nil {
			t.Errorf("Generate(%v) succeeded", args)
		}
	}
	a, err := g.ParseArgs([]string{"next=4096", "n=10"})
	if err != nil || a["next"] != 4096 || a["n"] != 10 {
		t.Errorf("ParseArgs = %v, %v", a, err)
	}
	for _, kv := range [][]string{{"next"}, {"next=big"}, {"nope=1"}} {
		if _, err := g.ParseArgs(kv); err == nil {
			t.Errorf("ParseArgs(%q) succeeded", kv)
		}
	}
	names := []string{}
	for _, g := range All() {
		names = append(names, g.Name)
		if g.Doc == "" || len(g.Params) == 0 {
			t.Errorf("generator %s has no doc or no parameters", g.Name)
		}
		for _, p := range g.Params {
			if p.Doc == "" || p.Default < p.Min || p.Default > p.Max {
				t.Errorf("%s.%s: no doc, or default %v outside [%v, %v]", g.Name, p.Name, p.Default, p.Min, p.Max)
			}
		}
	}
	if got := strings.Join(names, " "); got != "bump carving connection phases randfree zipf" {
		t.Errorf("All() = %s", got)
	}
	if _, ok := Lookup("nope"); ok {
		t.Error("Lookup(nope) found one")
	}
}

// TestGeneratorStops: Generate stops at the writer's first error.
func TestGeneratorStops(t *testing.T) {
	for _, g := range All() {
		w := &limitWriter{left: 10}
		if err := g.Generate(w, nil); !errors.Is(err, errFull) || w.calls != 11 {
			t.Errorf("%s: err %v after %d calls, want disk full after 11", g.Name, err, w.calls)
		}
	}
}

var errFull = errors.New("disk full")

type limitWriter struct{ left, calls int }

func (l *limitWriter) Write(trace.Event) error {
	l.calls++
	if l.left == 0 {
		return errFull
	}
	l.left--
	return nil
}

// phaseWriter records the ops of every event in order.
type phaseWriter struct{ ops []trace.Op }

func (w *phaseWriter) Write(e trace.Event) error { w.ops = append(w.ops, e.Op); return nil }

// TestGeneratorPhases checks each generator's phases against the trace it
// writes: the last phase ends at the last event, and every phase holds
// only the ops its name promises.
func TestGeneratorPhases(t *testing.T) {
	tests := []struct {
		gen  string
		args Args
		want []Phase
		ops  []trace.Op // the one op of each phase
	}{
		{"connection", Args{"n": 5}, []Phase{{"setup", 10}, {"scratch freed", 15}, {"next buffers", 20}}, []trace.Op{trace.Alloc, trace.Free, trace.Alloc}},
		{"carving", Args{"n": 5}, []Phase{{"setup", 10}, {"scratch freed", 15}, {"small objects", 20}, {"second wave", 25}}, []trace.Op{trace.Alloc, trace.Free, trace.Alloc, trace.Alloc}},
		{"carving", Args{"n": 5, "smalls": 0}, []Phase{{"setup", 10}, {"scratch freed", 15}, {"second wave", 20}}, []trace.Op{trace.Alloc, trace.Free, trace.Alloc}},
		{"bump", Args{"n": 7}, []Phase{{"allocate", 7}, {"free", 14}}, []trace.Op{trace.Alloc, trace.Free}},
		{"bump", Args{"n": 7, "free": 0}, []Phase{{"allocate", 7}}, []trace.Op{trace.Alloc}},
		{"zipf", Args{"n": 7}, nil, nil},
	}
	for _, tt := range tests {
		g, _ := Lookup(tt.gen)
		got, err := g.Phases(tt.args)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%s %v: Phases = %v, %v; want %v", tt.gen, tt.args, got, err, tt.want)
			continue
		}
		var w phaseWriter
		if err := g.Generate(&w, tt.args); err != nil {
			t.Fatal(err)
		}
		if len(got) > 0 && got[len(got)-1].End != int64(len(w.ops)) {
			t.Errorf("%s %v: last phase ends at %d, the trace at %d", tt.gen, tt.args, got[len(got)-1].End, len(w.ops))
		}
		start := int64(0)
		for i, p := range got {
			for j := start; j < p.End; j++ {
				if w.ops[j] != tt.ops[i] {
					t.Errorf("%s %v: event %d in phase %q is %v, want %v", tt.gen, tt.args, j+1, p.Name, w.ops[j], tt.ops[i])
					break
				}
			}
			start = p.End
		}
	}
	if _, err := connectionGen.Phases(Args{"n": -1}); err == nil {
		t.Error("Phases(n=-1) = nil error")
	}
}
