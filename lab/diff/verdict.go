package diff

import (
	"fmt"
	"math"
	"strconv"

	"github.com/carvelab/carve/internal/size"
)

// VerdictRule states the rule Verdict applies, for carve help diff.
const VerdictRule = "The verdict takes the first figure both traces have of: the program's peak RSS (VmHWM), " +
	"the peak marked heap, peak live; a change of less than 1% of A's is \"unchanged\". " +
	"It then names the type whose bytes live at the trace's peak changed most, either way: " +
	"one gone from B, or down by nine tenths or more, \"left the Go heap\" (\"left the heap\" " +
	"unless both are Go programs' traces); one only in B \"is new\"."

// The thresholds of VerdictRule.
const (
	unchangedBelow = 0.01 // of A's figure
	leftAtLeast    = 0.9  // of A's bytes of the type
)

// Verdict says in one line what changed between two traces, by
// VerdictRule: the first headline measure both have (of the program's
// peak RSS, the peak marked heap and peak live), then the group of the
// largest change (groups come largest change first). goHeap says both
// traces are Go programs'.
func Verdict(headline []Measure, groups []Group, goHeap bool) string {
	v := "verdict: "
	for _, name := range []string{ProgramPeakRSS, PeakMarkedHeap, PeakLive} {
		m, ok := find(headline, name)
		if !ok || m.Change == nil {
			continue
		}
		v += fmt.Sprintf("%s %s -> %s, ", m.Text, size.Format(*m.A), size.Format(*m.B))
		switch {
		case *m.Change == 0:
			v += "unchanged"
		case m.Percent == nil:
			v += "from none"
		case math.Abs(*m.Percent) < 100*unchangedBelow:
			v += "unchanged (" + Percent(*m.Percent) + ")"
		default:
			v += Percent(*m.Percent)
		}
		break
	}
	if len(groups) == 0 || groups[0].Change() == 0 {
		return v
	}
	g := groups[0]
	name, is, it := "the "+g.Key, "is", "it"
	if g.Key == NoLabel {
		name, is, it = "the objects of no label", "are", "they"
	}
	switch {
	case g.A == nil:
		return v + fmt.Sprintf("; %s %s new: %s at the trace's peak", name, is, size.Format(g.B.Bytes))
	case g.B.bytes() <= int64((1-leftAtLeast)*float64(g.A.Bytes)):
		heap := "the heap"
		if goHeap {
			heap = "the Go heap"
		}
		return v + fmt.Sprintf("; %s at the trace's peak %s -> %s: %s left %s", name, size.Format(g.A.Bytes), size.Format(g.B.bytes()), it, heap)
	}
	v += fmt.Sprintf("; %s at the trace's peak %s -> %s", name, size.Format(g.A.Bytes), size.Format(g.B.Bytes))
	if g.A.Bytes > 0 {
		v += ", " + Percent(100*float64(g.Change())/float64(g.A.Bytes))
	}
	return v
}

func find(ms []Measure, name string) (Measure, bool) {
	for _, m := range ms {
		if m.Name == name {
			return m, true
		}
	}
	return Measure{}, false
}

// Percent writes a change in percent with its sign: whole below -10% and
// above +10%, one decimal between ("-27%", "+3.5%").
func Percent(p float64) string {
	digits := 1
	if math.Abs(p) >= 10 {
		digits = 0
	}
	s := strconv.FormatFloat(p, 'f', digits, 64) + "%"
	if p >= 0 {
		s = "+" + s
	}
	return s
}
