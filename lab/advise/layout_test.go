package advise

import (
	"bytes"
	"fmt"
	"go/scanner"
	"go/token"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/carvelab/carve/lab/replay"
)

// checkWidth fails the test for each line of out wider than width.
func checkWidth(t *testing.T, out string, width int) {
	t.Helper()
	for i, l := range strings.Split(out, "\n") {
		if n := columns(l); n > width {
			t.Errorf("line %d is %d columns wide, want at most %d:\n%s", i+1, n, width, l)
		}
	}
}

// widest returns the columns of out's widest line.
func widest(out string) int {
	n := 0
	for l := range strings.Lines(out) {
		n = max(n, columns(strings.TrimSuffix(l, "\n")))
	}
	return n
}

// writeText returns what write writes at width.
func writeText(t *testing.T, write func(io.Writer, int) error, width int) string {
	t.Helper()
	var b bytes.Buffer
	if err := write(&b, width); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// hasRow reports whether a line of out holds every one of cells, in order.
func hasRow(out string, cells []string) bool {
	for l := range strings.Lines(out) {
		rest, ok := l, true
		for _, c := range cells {
			i := strings.Index(rest, c)
			if i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(c):]
		}
		if ok {
			return true
		}
	}
	return false
}

// TestAdviceWidth: a C trace's advice, its lists long and its figures
// large, fits 100 columns, its table cut to the headline and what fits;
// without a width every column is in the table's one line of heads.
func TestAdviceWidth(t *testing.T) {
	a := &Advice{Trace: "/a/long/path/to/the/recorded/traces/of/a/service/that/ran/for/a/week/heaptrack.service.raw.txt",
		Base: "best-fit", Threshold: 1 << 20, ThresholdRule: "1% of the baseline's peak, at least 64.0 KiB", Replays: 30,
		Note: "best fit's footprint counts the pages it mapped, not those it touched: a replay that never writes its blocks shows the heap larger than a program's RSS would"}
	a.Baseline.PeakFootprint, a.Baseline.PeakLive = 3<<40, 2<<40
	for i := range 20 {
		a.Candidates = append(a.Candidates, SizeCount{Size: 1 << i * 3, Requests: 123456789,
			Sites: []SiteCount{{Site: "libfoo.so!foo_parse_a_long_request_name (foo_parse.c:1234)", Requests: 100000000}, {Site: "bar.c:99", Requests: 23456789}}})
	}
	var round []Tried
	for _, c := range a.Candidates {
		round = append(round, Tried{Size: c.Size, Saving: -int64(c.Size) << 20})
	}
	round[3].Error = "the pool is at its limit of 512.0 KiB"
	a.Rounds = [][]Tried{round, round}
	for _, c := range a.Candidates[17:] {
		a.Pools = append(a.Pools, Pool{Size: c.Size, Saving: 1 << 30, SavingPercent: 12.5, PeakFootprint: 1234 << 30,
			PoolAtPeak: PoolAtPeak{Requests: c.Requests, Footprint: 999 << 30, Live: 998 << 30, Waste: 1 << 30, MaxFootprint: 999 << 30}, Limit: 2 << 40})
	}
	a.FinalPeakFootprint = a.Baseline.PeakFootprint - 3<<30
	a.Stop = "the best remaining candidate, 8 B, would save 64.0 KiB, below the threshold 1.00 MiB"
	a.Go = goSnippet(a.Pools)

	heads := []string{"#", "size", "saving", "requests", "peak footprint after", "pool footprint", "pool live", "waste"}
	out := writeText(t, a.WriteText, 100)
	checkWidth(t, out, 100)
	if !hasRow(out, heads[:3]) || hasRow(out, heads) || !strings.Contains(out, "--wide adds the column") {
		t.Errorf("at 100 columns, want the headline columns and those that fit, the others named:\n%s", out)
	}
	if !strings.Contains(out, "foo_parse.c:1234") || !strings.Contains(out, "the pool is at its limit") {
		t.Errorf("at 100 columns, the sites or a failure are missing:\n%s", out)
	}
	wide := writeText(t, a.WriteText, 0)
	if !hasRow(wide, heads) || strings.Contains(wide, "--wide") || widest(wide) <= 100 {
		t.Errorf("wide: want every column, lines unwrapped:\n%s", wide)
	}
}

// TestTypeAdviceWidth: a Go trace's advice fits 100 columns: its table
// cut to the headline and what fits, each site on a line of its own,
// the types that hold pointers a short line each under their reason;
// without a width, every column and each reason whole.
func TestTypeAdviceWidth(t *testing.T) {
	gogcs := []int{96, 98, 100, 102, 104}
	a := &TypeAdvice{Trace: "go.trace", Base: "go(paced)", GOGC: 100, Repeats: 5, Candidates: 5, GOGCs: gogcs, Replays: 56,
		Floor: "1%,1MiB", FloorBytes: 1 << 20, PeakMarked: 25 << 20, Paced: true,
		Baseline: Measured{PeakLive: 34 << 20, PeakRSS: 54 << 20, Low: 51 << 20, High: 56 << 20},
		Program:  &Measured{PeakRSS: 54 << 20}, Assumes: assumes(true, gogcs), Untyped: true,
		Left: []Left{{Why: LeftUntyped, Objects: 248, Bytes: 2 << 20}, {Why: LeftRuntime, Types: 27, Objects: 52, Bytes: 200 << 10}}}
	move := func(site string) Move {
		return Move{Type: "[]byte", Label: "uint8", Elem: 1, Site: site, Into: replay.IntoPools, Sizes: []int{512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576}}
	}
	for i, site := range []string{"github.com/some/long/module/path/internal/server.(*Server).Serve (server.go:68)", "main.run (main.go:55)"} {
		m := move(site)
		tt := TypeTrial{Type: "[]byte", Label: "uint8", Site: site, Size: 1, Objects: 52778, Bytes: 25 << 20, Rule: 25 << 20, NoiseBound: 54 << 20, Suggested: i == 0,
			Targets:  []Target{{Move: m, Low: 5 << 20, High: 26 << 20, Saved: 5, LowPercent: 9.3}, {Move: Move{Type: "[]byte", Label: "uint8", Site: site, Into: replay.IntoHeap}, Error: "the arena outgrew the row's budget of 1.00 GiB"}},
			Rounding: &ClassRounding{EvenPercent: 6.1, MostPercent: 12.3, AtPeak: 1 << 20}}
		a.Tried = append(a.Tried, tt)
		if tt.Suggested {
			a.Suggested = append(a.Suggested, tt)
		} else {
			a.Unproven = append(a.Unproven, tt)
		}
	}
	a.Tried = append(a.Tried, TypeTrial{Type: "main.header", Label: "main.header", Size: 64, Objects: 10, Bytes: 640, Error: "the Go heap's replay failed: a child process exited with status 2 before its first row"})
	a.Go, a.GoUnproven = Code([]Move{a.Suggested[0].Targets[0].Move}), Code([]Move{a.Unproven[0].Targets[0].Move})
	for i := range 10 {
		name := fmt.Sprintf("main.conn%d", i)
		if i == 9 {
			name = "sync.indirect[go.shape.interface {},go.shape.interface {},go.shape.struct { a, b, c int }]"
		}
		a.Refused = append(a.Refused, Refused{Type: name, Bytes: 1 << 20, PtrBytes: 72, Size: 88, Why: "72 of its 88 bytes may hold Go pointers: " + pointersWhy})
	}

	heads := []string{"type", "into", "saving: freed late to early", "above 0 at", "at most", "at the trace's peak", "objects", "peak RSS"}
	out := writeText(t, a.WriteText, 100)
	checkWidth(t, out, 100)
	if !hasRow(out, heads[:3]) || hasRow(out, heads) || !strings.Contains(out, "--wide adds the column") {
		t.Errorf("at 100 columns, want the headline columns and those that fit, the others named:\n%s", out)
	}
	if !hasRow(out, []string{"[]byte", "pools", "5.00 MiB to 26.00 MiB", "suggested"}) || !strings.Contains(out, "\n    at main.run (main.go:55)\n") {
		t.Errorf("at 100 columns, want a row of the type and its move, its site below:\n%s", out)
	}
	if n := strings.Count(strings.Join(strings.Fields(out), " "), pointersWhy); n != 1 || !strings.Contains(out, "\n  main.conn0 (1.00 MiB at the peak): 72 of 88 bytes may hold pointers\n") {
		t.Errorf("at 100 columns, want the reason once (%d) and a short line a type:\n%s", n, out)
	}
	wide := writeText(t, a.WriteText, 0)
	if !hasRow(wide, heads) || strings.Contains(wide, "--wide") || widest(wide) <= 100 {
		t.Errorf("wide: want every column, lines unwrapped:\n%s", wide)
	}
	if n := strings.Count(wide, pointersWhy); n != len(a.Refused) {
		t.Errorf("wide: the reason said %d times, want once a type (%d)", n, len(a.Refused))
	}
	for _, want := range []string{"main.header", "a child process exited", "the arena outgrew", "github.com/some/long/module/path/internal/server.(*Server).Serve (server.go:68)"} {
		if !strings.Contains(out, want) || !strings.Contains(wide, want) {
			t.Errorf("the text lacks %q:\n%s", want, out)
		}
	}
}

// TestCodeLayout: code laid out to a width is the same Go, its comments
// aside, every line within the width.
func TestCodeLayout(t *testing.T) {
	m := Move{Type: "[]main.sample", Label: "main.sample", Elem: 24, Site: "github.com/some/long/module/path/internal/stats.(*Window).Add (window.go:123)", Into: replay.IntoPools}
	for s := 24; s < 1<<16; s += 24 * 7 {
		m.Sizes = append(m.Sizes, s)
	}
	code := Code([]Move{m, {Type: "main.header", Label: "main.header", Elem: 64, Into: replay.IntoPools, Chunk: 64}})
	for _, width := range []int{100, 80} {
		var b bytes.Buffer
		ew := &textWriter{w: &b, width: width}
		ew.code("\t", code)
		checkWidth(t, b.String(), width)
		if got, want := goTokens(t, b.String()), goTokens(t, code); !slices.Equal(got, want) {
			t.Errorf("at %d columns, the code's tokens changed:\n%s", width, b.String())
		}
	}
}

// goTokens returns the tokens of Go code, its comments left out.
func goTokens(t *testing.T, code string) []string {
	t.Helper()
	var s scanner.Scanner
	fs := token.NewFileSet()
	src := []byte(code)
	s.Init(fs.AddFile("", fs.Base(), len(src)), src, func(pos token.Position, msg string) { t.Errorf("%s: %s", pos, msg) }, 0)
	var toks []string
	for {
		// A line's end inserts a semicolon where a statement may end, and
		// none after a comma: the tokens tell a break Go allows.
		_, tok, lit := s.Scan()
		if tok == token.EOF {
			return toks
		}
		toks = append(toks, tok.String()+lit)
	}
}
