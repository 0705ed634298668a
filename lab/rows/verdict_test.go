package rows

import (
	"slices"
	"testing"

	"github.com/carvelab/carve/lab/replay"
)

// row is a measured row: peak RSS rss for peak live live, and, with
// phases, footprints at the ends of two phases.
func row(name string, live, rss int64, fp ...int64) Row {
	r := Row{Allocator: name, PeakLive: live, PeakResident: rss}
	r.setRSS(0)
	for i, f := range fp {
		r.Phases = append(r.Phases, Phase{Name: []string{"setup", "second wave"}[i], Footprint: f})
	}
	return r
}

// routed is r with routes in front that held idle bytes free at its
// peak footprint.
func routed(r Row, idle int64) Row {
	r.Routed = &replay.Routed{IdleAtPeakFootprint: idle}
	return r
}

// collected is r collected as by says (replay.ByProgram, ...).
func collected(r Row, by string) Row {
	r.Collected = by
	return r
}

func TestFindings(t *testing.T) {
	const MiB = 1 << 20
	tests := []struct {
		name string
		rows []Row
		want []string
	}{
		{"no row measured", []Row{{Allocator: "glibc", Error: "not installed"}}, nil},
		{
			"the lowest, glibc and go beside it",
			[]Row{row("best-fit", 10*MiB, 11*MiB), row("go", 10*MiB, 26*MiB), row("glibc", 10*MiB, 12*MiB)},
			[]string{
				"lowest peak RSS / peak live: best-fit, 1.100 (11.00 MiB resident for 10.00 MiB live)",
				"glibc 1.200, 1.00 MiB (9.1%) above best-fit's",
				"go 2.600, 2.4 times best-fit's",
			},
		},
		{
			"a row that failed is left out",
			[]Row{row("best-fit", 10*MiB, 11*MiB), {Allocator: "glibc", Error: "stopped", PeakLive: 10 * MiB}},
			[]string{"lowest peak RSS / peak live: best-fit, 1.100 (11.00 MiB resident for 10.00 MiB live)"},
		},
		{
			// A trace of a few bytes: glibc's RSS stays within the pages it
			// held at its baseline.
			"an RSS that never rose",
			[]Row{row("jemalloc", 16, 4096), row("glibc", 16, 0)},
			[]string{
				"lowest peak RSS / peak live: jemalloc, 256.000 (4.0 KiB resident for 16 B live)",
				"glibc -, " + NoRSS,
			},
		},
		{
			"a pooled row beside its plain one, and the last phase of both",
			[]Row{row("best-fit", 12*MiB, 13*MiB, 13*MiB, 15*MiB), row("best-fit+pool(1024)", 12*MiB, 12*MiB, 12*MiB, 12*MiB)},
			[]string{
				"lowest peak RSS / peak live: best-fit+pool(1024), 1.000 (12.00 MiB resident for 12.00 MiB live)",
				"best-fit+pool(1024): peak RSS 12.00 MiB, 1.00 MiB (7.7%) below best-fit's",
				"the last phase (second wave) grew the footprint of best-fit+pool(1024) 0 B, best-fit 2.00 MiB",
			},
		},
		{
			"a pool that helps: no word of what it held free",
			[]Row{row("heap", 12*MiB, 13*MiB), routed(row("heap+pool(1024)", 12*MiB, 12*MiB), MiB)},
			[]string{
				"lowest peak RSS / peak live: heap+pool(1024), 1.000 (12.00 MiB resident for 12.00 MiB live)",
				"heap+pool(1024): peak RSS 12.00 MiB, 1.00 MiB (7.7%) below heap's",
			},
		},
		{
			"a pool that hurts: what it held free at the peak, which the others could not reuse",
			[]Row{row("heap", 40*MiB, 40*MiB), routed(row("heap+pool(1024)", 40*MiB, 50*MiB), 10*MiB)},
			[]string{
				"lowest peak RSS / peak live: heap, 1.000 (40.00 MiB resident for 40.00 MiB live)",
				"heap+pool(1024): peak RSS 50.00 MiB, 10.00 MiB (25.0%) above heap's: at its peak footprint, pool(1024) held 10.00 MiB free, which only its own requests could reuse",
			},
		},
		{
			"a pool that hurts but held nothing free: no reason given",
			[]Row{row("heap", 40*MiB, 40*MiB), routed(row("heap+pool(1024)", 40*MiB, 50*MiB), 0)},
			[]string{
				"lowest peak RSS / peak live: heap, 1.000 (40.00 MiB resident for 40.00 MiB live)",
				"heap+pool(1024): peak RSS 50.00 MiB, 10.00 MiB (25.0%) above heap's",
			},
		},
		{
			"many pooled rows: one line of changes, one of what the pools held where they hurt",
			[]Row{
				row("heap", 40*MiB, 40*MiB), routed(row("heap+pool(1024)", 40*MiB, 50*MiB), 10*MiB),
				row("buddy", 40*MiB, 60*MiB), routed(row("buddy+pool(1024)", 40*MiB, 66*MiB), 10*MiB),
				row("best-fit", 40*MiB, 51*MiB), routed(row("best-fit+pool(1024)", 40*MiB, 50*MiB), 2*MiB),
			},
			[]string{
				"lowest peak RSS / peak live: heap, 1.000 (40.00 MiB resident for 40.00 MiB live)",
				"the pools in front changed peak RSS by: heap +25.0%, buddy +10.0%, best-fit -2.0%",
				"where it rose, the pools held free at the row's peak footprint (memory only their own requests could reuse): heap 10.00 MiB, buddy 10.00 MiB",
			},
		},
		{
			// On a trace that records the program's collections, a go row
			// with a type moved off it is paced by the model: it is
			// compared with the go row paced so, not with the one
			// collected where the program did.
			"a what-if beside the paced baseline",
			[]Row{collected(row("go", 10*MiB, 30*MiB), replay.ByProgram), collected(row("go(paced)", 10*MiB, 36*MiB), replay.ByPacing),
				collected(row("go+heap(type=uint8)", 10*MiB, 24*MiB), replay.ByPacing)},
			[]string{
				"lowest peak RSS / peak live: go+heap(type=uint8), 2.400 (24.00 MiB resident for 10.00 MiB live)",
				"go(paced) 3.600, 12.00 MiB (50.0%) above go+heap(type=uint8)'s",
				"go+heap(type=uint8): peak RSS 24.00 MiB, 12.00 MiB (33.3%) below go(paced)'s (every object freed at the start of the mark that did not find it, the latest it can have died: the late bound; carve advise measures the early one too)",
			},
		},
		{
			"a what-if without a paced baseline is compared with none",
			[]Row{collected(row("go", 10*MiB, 30*MiB), replay.ByProgram), collected(row("go+heap(type=uint8)", 10*MiB, 24*MiB), replay.ByPacing)},
			[]string{
				"lowest peak RSS / peak live: go+heap(type=uint8), 2.400 (24.00 MiB resident for 10.00 MiB live)",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Table{Rows: tt.rows}.Findings()
			if !slices.Equal(got, tt.want) {
				t.Errorf("Findings:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}
