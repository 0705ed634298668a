package rows

import (
	"fmt"
	"strings"

	"github.com/carvelab/carve/internal/size"
	"github.com/carvelab/carve/lab/replay"
)

// Verdict says in a sentence what a table shows: its Findings, joined.
func (t Table) Verdict() string { return strings.Join(t.Findings(), "; ") }

// Findings says what a table shows, a clause each: the row with the
// lowest headline (peak RSS / peak live), how glibc and the Go heap
// compare with it, what a pool in front of an allocator changed (and,
// where it raised peak RSS, what it held free at the row's peak), and, for
// a generated scenario, what its last phase cost. It is nil for a table
// with no row measured.
func (t Table) Findings() []string {
	best := -1
	for i, r := range t.Rows {
		if r.Error == "" && r.headline() > 0 && (best < 0 || r.headline() < t.Rows[best].headline()) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	b := t.Rows[best]
	var s []string
	if b.PeakMarked > 0 {
		s = append(s, fmt.Sprintf("lowest peak RSS / peak marked heap: %s, %.3f (%s resident for a marked heap of %s)", b.Allocator, b.MarkedRatio, size.Format(b.PeakRSS), size.Format(b.PeakMarked)))
	} else {
		s = append(s, fmt.Sprintf("lowest peak RSS / peak live: %s, %.3f (%s resident for %s live)", b.Allocator, b.RSSRatio, size.Format(b.PeakRSS), size.Format(b.PeakLive)))
	}
	var others []string
	for _, name := range []string{"glibc", "go"} {
		r, ok := t.row(name)
		if name == "go" && ok && r.Collected != b.Collected && b.Collected == replay.ByPacing {
			// The lowest is a what-if paced by the model: the go row
			// beside it is the one paced so.
			if r, ok = t.plain(name, b); ok {
				name = r.Allocator
			}
		}
		switch {
		case !ok || r.Allocator == b.Allocator || r.Error != "":
		case r.RSSNote != "":
			others = append(others, fmt.Sprintf("%s -, %s", name, r.RSSNote))
		default:
			others = append(others, fmt.Sprintf("%s %.3f, %s", name, r.headline(), compare(r.PeakRSS, b.PeakRSS, b.Allocator)))
		}
	}
	s = append(s, others...)
	var pooled, changes, idle []string
	for _, r := range t.Rows {
		// A row with pools (or routes) in front, and the same allocator
		// without: "first-fit+pool(1024)" and "first-fit".
		base, routes, pooledRow := strings.Cut(r.Allocator, "+")
		if r.Error != "" || !pooledRow {
			continue
		}
		plain, ok := t.plain(base, r)
		if !ok || plain.Error != "" {
			continue
		}
		clause := fmt.Sprintf("%s: peak RSS %s, %s", r.Allocator, size.Format(r.PeakRSS), compare(r.PeakRSS, plain.PeakRSS, plain.Allocator))
		if n := idleWhereWorse(r, plain); n > 0 {
			clause += fmt.Sprintf(": at its peak footprint, %s held %s free, which only its own requests could reuse", routes, size.Format(n))
			idle = append(idle, fmt.Sprintf("%s %s", plain.Allocator, size.Format(n)))
		}
		if r.Collected == replay.ByPacing && strings.Contains(r.Allocator, "type=") && !strings.Contains(r.Allocator, ",early)") {
			clause += " (every object freed at the start of the mark that did not find it, the latest it can have died: the late bound; carve advise measures the early one too)"
		}
		pooled = append(pooled, clause)
		changes = append(changes, fmt.Sprintf("%s %+.1f%%", plain.Allocator, 100*float64(r.PeakRSS-plain.PeakRSS)/float64(max(plain.PeakRSS, 1))))
	}
	if len(pooled) > 2 {
		// One line for many: the change in peak RSS the pools brought,
		// and what they held free where it rose.
		pooled = []string{"the pools in front changed peak RSS by: " + strings.Join(changes, ", ")}
		if len(idle) > 0 {
			pooled = append(pooled, "where it rose, the pools held free at the row's peak footprint (memory only their own requests could reuse): "+strings.Join(idle, ", "))
		}
	}
	s = append(s, pooled...)
	if phase, ok := t.lastPhase(); ok {
		var grew []string
		seen := map[string]bool{}
		// The best row, the same allocator without its pools, glibc and
		// the Go heap.
		plain, _, _ := strings.Cut(b.Allocator, "+")
		for _, name := range []string{b.Allocator, plain, "glibc", "go"} {
			if r, ok := t.row(name); ok && !seen[name] {
				seen[name] = true
				if _, g, ok := r.Growth(); ok {
					grew = append(grew, fmt.Sprintf("%s %s", name, size.Format(g)))
				}
			}
		}
		if len(grew) > 0 {
			s = append(s, fmt.Sprintf("the last phase (%s) grew the footprint of %s", phase, strings.Join(grew, ", ")))
		}
	}
	return s
}

// idleWhereWorse returns, for a row r with routes in front whose peak RSS
// is above plain's, the same allocator's without them, what the routes
// held free at r's peak footprint (replay.Routed.IdleAtPeakFootprint):
// memory that served the routes' requests once and that r's other
// requests could not use, where plain's allocator could. 0 otherwise.
func idleWhereWorse(r, plain Row) int64 {
	if r.Routed == nil || r.PeakRSS <= plain.PeakRSS {
		return 0
	}
	return r.Routed.IdleAtPeakFootprint
}

// compare says how n bytes compare with m, another row's: "4.0% above
// best-fit's", "2.8 times best-fit's", "the same as best-fit's".
func compare(n, m int64, name string) string {
	switch {
	case m <= 0:
		return ""
	case n == m:
		return "the same as " + name + "'s"
	case n >= 2*m:
		return fmt.Sprintf("%.1f times %s's", float64(n)/float64(m), name)
	case n > m:
		return fmt.Sprintf("%s (%.1f%%) above %s's", size.Format(n-m), 100*float64(n-m)/float64(m), name)
	}
	return fmt.Sprintf("%s (%.1f%%) below %s's", size.Format(m-n), 100*float64(m-n)/float64(m), name)
}

// row returns the row of the table called label.
func (t Table) row(label string) (Row, bool) {
	for _, r := range t.Rows {
		if r.Allocator == label {
			return r, true
		}
	}
	return Row{}, false
}

// plain returns the row a row r with pools or routes in front of the
// allocator base is compared with: base's row, collected as r is. A go
// row with types moved off it, on a trace that records the program's
// collections, is paced by the model (replay.ByPacing) and compared
// with the go row paced so (Spec.Paced), never with the one collected
// where the program did: the two differ by the model's own error.
func (t Table) plain(base string, r Row) (Row, bool) {
	if p, ok := t.row(base); ok && p.Collected == r.Collected {
		return p, true
	}
	for _, p := range t.Rows {
		if !strings.Contains(p.Allocator, "+") && p.Collected != "" && p.Collected == r.Collected && p.GOGC == r.GOGC {
			return p, true
		}
	}
	return Row{}, false
}

// lastPhase returns the name of the trace's last phase, if it has two or
// more.
func (t Table) lastPhase() (string, bool) {
	for _, r := range t.Rows {
		if name, _, ok := r.Growth(); ok {
			return name, true
		}
	}
	return "", false
}

// headline returns the row's headline: peak RSS over the peak marked
// heap for a Go program's trace whose frees were moved to its marks'
// ends, over peak live otherwise.
func (r Row) headline() float64 {
	if r.PeakMarked > 0 {
		return r.MarkedRatio
	}
	return r.RSSRatio
}
