package advise

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"github.com/carvelab/carve/internal/size"
	"github.com/carvelab/carve/internal/text"
	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/rows"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/traces"
	"github.com/carvelab/carve/pool"
)

// Advice for a Go program: which of its types to move off the Go heap.
// The base is the Go heap itself (the go row, replayed in a Go child of
// its own, its collections where the pacer aims them); each candidate is
// a replay of the whole trace with one type's objects routed to carve
// pools, one per size its objects come in (replay.WithRoutes), to an
// arena reset when the last of them dies, or, for objects of more than
// one size, to one carve heap; the saving in the headline,
// peak RSS, ranks them. Only pointer-free types can move: the collector
// does not look inside carve memory.
//
// Where the collections fall moves a Go heap's peak by more than a small
// type weighs: a few hundred kilobytes either way from a collection that
// comes a little earlier or later. So every replay is made Repeats times,
// at GOGC a little apart (the row's, then GOGCStep below and above it,
// then twice that...), and a candidate's saving is measured pairwise, the
// Go heap's peak less the candidate's at the same GOGC: a type is
// suggested only when the median saving is at least MinTypeSaving and
// the pairs that save are at least four in five (Quorum). One pair may
// lose: a collection that happens to fall just before the peak leaves the
// Go heap alone lower than its other GOGCs do (on the connection workload
// its peak ranges over a third of its median), and that one GOGC should
// not outvote the others.
//
// On a trace that records the program's collections (its frees moved to
// the marks' ends: traces.Trace.Frees), a what-if cannot collect where
// the program did, so the baseline and every what-if are paced by one
// model (replay.NewPacedGoHeap: the program's marked heap less the
// moved objects its mark found, times how far its heap grew over its
// marked heap in that cycle, that ratio's excess over 1 scaled by
// GOGC/100 for the repeats), the saving
// is taken between the two, and the model's error is measured: the paced
// baseline against the Go heap collected where the program collected.
// Each move is then replayed twice, its objects freed late (at the start
// of the mark that did not find them, the latest they can have died:
// trace.FreeMarkStart), the program's marks as long as they were, and
// early (as early as the trace allows: trace.EarlyFrees), the marks
// shorter by the moved objects' share of what they visited, which bound
// the saving of a program that frees them itself. A median saving above what the moved bytes cost on
// the Go heap (NoiseBound) is placement noise, never suggested.

// GOGCStep is how far apart the repeats' GOGCs are, and MinTypeSaving
// the least median saving of peak RSS a type is suggested for.
const (
	GOGCStep      = 2
	MinTypeSaving = 64 << 10
)

// MaxRepeats bounds TypeConfig.Repeats: each repeat is another
// 1 + 2 × Candidates replays, at a GOGC further from the row's.
const MaxRepeats = 50

// TypesSchema names the version of the JSON of a TypeAdvice.
const TypesSchema = "carve.advise-types/v3"

// TypeConfig is what to advise on for a labelled trace (a Go execution
// trace), and how.
type TypeConfig struct {
	Trace traces.Trace
	// GOGC is the go row's (0: rows.DefaultGOGC).
	GOGC int
	// Candidates is how many pointer-free types, by their bytes at the
	// trace's peak, are tried (5 when 0); Repeats how many times each
	// replay is made, at GOGCs GOGCStep apart around GOGC (5 when 0, at
	// most MaxRepeats);
	// Jobs the replays at once (1 when 0).
	Candidates, Repeats, Jobs int
	// MaxRequest and MaxRSS are the rows' budgets (rows.Options).
	MaxRequest, MaxRSS int64
}

// TypeAdvice is what the advisor measured for a Go trace.
type TypeAdvice struct {
	Schema  string `json:"schema"`
	Trace   string `json:"trace"`
	Base    string `json:"base"`
	GOGC    int    `json:"gogc"`
	Repeats int    `json:"repeats"`
	// GOGCs are the repeats' GOGCs, the row's first.
	GOGCs   []int `json:"gogcs"`
	Replays int   `json:"replays"`
	// Baseline is the Go heap alone: paced by the model (Paced) on a
	// trace that records the program's collections, the what-ifs' own
	// pacing, so that a saving is taken against the same model.
	Baseline Measured `json:"baseline"`
	// Paced says the trace records the program's collections: the frees
	// moved to the marks' ends, the baseline and the what-ifs paced at
	// the program's ratio (replay.NewPacedGoHeap), their repeats at
	// GOGCs that move each collection by a fraction of a cycle; Program
	// is the Go heap collected where the program collected, and
	// ModelError the paced baseline's peak RSS at the row's GOGC less
	// Program's: the model's own error.
	Paced      bool      `json:"paced"`
	Program    *Measured `json:"program_collected,omitempty"`
	ModelError int64     `json:"model_error_bytes"`
	// Tried are the candidates, the best saving first.
	Tried []TypeTrial `json:"tried"`
	// Suggested are the candidates that saved at Quorum of the GOGCs or
	// more, by at least MinTypeSaving in the median, in the order of
	// Tried.
	Suggested []TypeTrial `json:"suggested"`
	// Refused are the types that hold pointers, by bytes at the peak,
	// and why they cannot move.
	Refused []Refused `json:"refused"`
	// Assumes says what the figures assume.
	Assumes []string `json:"assumes"`
	Go      string   `json:"go"` // the code that makes the suggested pools, arenas and heaps
}

// Measured is a replay's headline over its repeats.
type Measured struct {
	PeakLive int64 `json:"peak_live"`
	// PeakRSS is the median of the repeats' peak RSS; Low and High the
	// least and the most; Peaks each repeat's, in the order of GOGCs.
	PeakRSS   int64    `json:"peak_rss"`
	Low, High int64    `json:"-"`
	Range     [2]int64 `json:"peak_rss_range"`
	Peaks     []int64  `json:"peaks"`
	Error     string   `json:"error,omitempty"`
}

// TypeTrial is one type moved off the Go heap, measured.
type TypeTrial struct {
	Type     string  `json:"type"`
	Size     int64   `json:"size"` // the type's size; 1 for a []byte's uint8
	Objects  int64   `json:"objects_at_peak"`
	Bytes    uint64  `json:"bytes_at_peak"`
	Allocs   int64   `json:"allocs"`
	MeanLife float64 `json:"mean_life_events"`
	// Into is "pool", "arena" or "heap": where the measured replay put
	// them (a heap only for objects of more than one size).
	Into string `json:"into"`
	Measured
	// Saving is the median of the pairwise savings, the baseline's peak
	// RSS less this one's at the same GOGC, SavingLow, SavingHigh the
	// least and the most of them, and Saved how many of them are above
	// zero; Rule is what "a live byte costs
	// 1 + GOGC/100 on the Go heap and one in a pool" predicts:
	// Bytes × GOGC/100.
	Saving                int64    `json:"saving"`
	SavingLow, SavingHigh int64    `json:"-"`
	SavingRange           [2]int64 `json:"saving_range"`
	SavingPercent         float64  `json:"saving_percent"`
	Saved                 int      `json:"saved_at"`
	Rule                  int64    `json:"rule_predicts"`
	// With Paced, the saving is a range (Bounds, one per target; the
	// target's Into first): SavingLowBytes when the moved objects are
	// freed at the start of the mark that did not find them, the latest
	// they can have died (the late bound: Saving),
	// SavingHighBytes when freed as early as the trace allows (the
	// later of their birth and the start of the mark before, or of the
	// last mark for an object the trace never frees: a program that
	// frees them when it drops them).
	SavingLowBytes  int64   `json:"saving_low_bytes"`
	SavingHighBytes int64   `json:"saving_high_bytes"`
	Bounds          []Bound `json:"bounds,omitempty"`
	// NoiseBound is the most a move can save: the moved bytes at the
	// peak × (1 + GOGC/100) plus their share of the baseline's peak RSS
	// above its peak live, and never more than the baseline's peak RSS. A median saving above it is PlacementNoise
	// (where the re-paced collections fell), never suggested.
	NoiseBound     int64 `json:"noise_bound_bytes"`
	PlacementNoise bool  `json:"placement_noise,omitempty"`
	// Skipped says the type was not replayed: its NoiseBound, the most
	// its move can save, is below MinTypeSaving, so no replay could
	// suggest it.
	Skipped bool `json:"skipped,omitempty"`
	// Rounding is, for a type whose objects come in more than one size
	// (and so is tried in a heap), how far the trace's sizes, Go's size
	// classes, are above the requests they stand for.
	Rounding *ClassRounding `json:"class_rounding,omitempty"`
	// sizes says its objects come in more than one size.
	sizes bool
	// Sizes are, for a []byte's uint8 that is suggested, the sizes its
	// objects come in, the most bytes allocated first: the pools the code
	// makes.
	Sizes []SizeCount `json:"sizes,omitempty"`
}

// Bound is a move's saving into one target, as a range: the median
// saving with the objects freed late (the latest they can have died)
// and early (as early as it allows; on a trace without collections,
// both are the saving with the objects freed where the trace frees
// them). PeakRSS is the late replay's median.
type Bound struct {
	Into            string `json:"into"`
	SavingLowBytes  int64  `json:"saving_low_bytes"`
	SavingHighBytes int64  `json:"saving_high_bytes"`
	PeakRSS         int64  `json:"peak_rss"`
	// Error says why a replay into the target failed (an arena that
	// never resets outgrowing the row's budget, say): its savings are 0.
	Error string `json:"error,omitempty"`
}

// targets returns where a candidate is tried: pools (one per size its
// objects come in) and an arena, and, for objects of more than one
// size, a carve heap, which serves every size from one allocator.
func (t TypeTrial) targets() []replay.Target {
	if t.sizes {
		return []replay.Target{replay.IntoPools, replay.IntoArena, replay.IntoHeap}
	}
	return []replay.Target{replay.IntoPools, replay.IntoArena}
}

// ClassRounding is how far a Go trace's sizes of one type's objects,
// its size classes, are above the requests they stand for
// (trace.GoRequests): a program asks for n bytes, the trace records
// n's class. Pools of the classes' sizes hold what the trace says; a
// heap, which rounds a request to a few bytes, holds less.
type ClassRounding struct {
	// Traced is the bytes of every allocation of the type as the trace
	// sizes them; Even what they come to if the requests spread evenly
	// over each class's range, and Least if each were one byte above
	// the class below.
	Traced uint64 `json:"traced_bytes"`
	Even   uint64 `json:"requests_even_bytes"`
	Least  uint64 `json:"requests_least_bytes"`
	// EvenPercent and MostPercent are the over-statement, (Traced -
	// Even) / Traced and (Traced - Least) / Traced, in percent; AtPeak
	// is EvenPercent of the type's bytes at the peak: about how much a
	// heap's saving is under-stated.
	EvenPercent float64 `json:"overstated_percent_even"`
	MostPercent float64 `json:"overstated_percent_most"`
	AtPeak      int64   `json:"overstated_bytes_at_peak"`
}

// classRounding reads tr and measures the class rounding of the objects
// labelled name, whose bytes at the trace's peak are atPeak.
func classRounding(tr traces.Trace, name string, atPeak uint64) (ClassRounding, error) {
	sizes, err := labelSizes(tr, name, 0, math.MaxUint64)
	if err != nil {
		return ClassRounding{}, err
	}
	var r ClassRounding
	for _, sc := range sizes {
		lo, hi := trace.GoRequests(uint64(sc.Size))
		n := uint64(sc.Requests)
		r.Traced += hi * n
		r.Least += lo * n
		r.Even += (lo + hi) * n / 2
	}
	if r.Traced > 0 {
		r.EvenPercent = 100 * float64(r.Traced-r.Even) / float64(r.Traced)
		r.MostPercent = 100 * float64(r.Traced-r.Least) / float64(r.Traced)
	}
	r.AtPeak = int64(float64(atPeak) * r.EvenPercent / 100)
	return r, nil
}

// Refused is a type that cannot move to carve memory.
type Refused struct {
	Type     string `json:"type"`
	Bytes    uint64 `json:"bytes_at_peak"`
	PtrBytes int64  `json:"ptr_bytes"`
	Size     int64  `json:"size"`
	Why      string `json:"why"`
}

// AdviseTypes measures the Go heap on a labelled trace and the effect of
// moving each of its largest pointer-free types off it. Its error wraps
// replay.ErrSource for a trace that cannot be read, ErrNoTypes for one
// without labels.
func AdviseTypes(c TypeConfig) (*TypeAdvice, error) {
	if c.Candidates <= 0 {
		c.Candidates = 5
	}
	if c.Repeats <= 0 {
		c.Repeats = 5
	}
	if c.Jobs <= 0 {
		c.Jobs = 1
	}
	if c.GOGC <= 0 {
		c.GOGC = rows.DefaultGOGC
	}
	if c.Repeats > MaxRepeats {
		return nil, fmt.Errorf("advise: %d repeats, more than %d (MaxRepeats)", c.Repeats, MaxRepeats)
	}
	// Decoded once: for the summary and every replay.
	c.Trace = c.Trace.Spooled()
	src, closer, err := c.Trace.Open()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", replay.ErrSource, c.Trace.Label, err)
	}
	sum, err := trace.SummarizeFrom(src)
	closer.Close()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", replay.ErrSource, c.Trace.Label, err)
	}
	if len(sum.Labels) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoTypes, c.Trace.Label)
	}
	// A trace that records the program's collections has its frees at
	// the marks' ends now that it has been opened.
	paced := c.Trace.FreesMoved()
	base := rows.Spec{Alloc: "go", GOGC: c.GOGC, Paced: paced}
	adv := &TypeAdvice{Schema: TypesSchema, Trace: c.Trace.Label, Base: base.Label(), GOGC: c.GOGC, Repeats: c.Repeats, Paced: paced,
		Tried: []TypeTrial{}, Suggested: []TypeTrial{}, Refused: []Refused{}}
	var cands []TypeTrial
	for _, l := range sum.Labels {
		if l.Name == "" || l.Bytes == 0 {
			continue
		}
		if l.PtrBytes != 0 {
			why := "its type is unknown to the trace"
			if l.PtrBytes > 0 {
				why = fmt.Sprintf("%d of its %d bytes may hold Go pointers: the collector does not look inside carve memory, so what they point to could be freed under it", l.PtrBytes, l.Size)
			}
			adv.Refused = append(adv.Refused, Refused{Type: l.Name, Bytes: l.Bytes, PtrBytes: l.PtrBytes, Size: l.Size, Why: why})
			continue
		}
		if len(cands) < c.Candidates && Movable(l.Name) {
			cands = append(cands, TypeTrial{Type: l.Name, Size: l.Size, Objects: l.Objects, Bytes: l.Bytes, Allocs: l.Allocs, MeanLife: l.MeanLife,
				sizes: l.MinSize != l.MaxSize})
		}
	}
	adv.Refused = adv.Refused[:min(len(adv.Refused), 10)]

	// The baseline first, at each GOGC; then each candidate whose bytes
	// could save MinTypeSaving (NoiseBound), into each target that fits
	// it (targets).
	for r := range c.Repeats {
		step := (r + 1) / 2 * GOGCStep
		if r%2 == 1 {
			step = -step
		}
		adv.GOGCs = append(adv.GOGCs, max(c.GOGC+step, 1))
	}
	at := func(gogc int, route *replay.Route, early bool) rows.Spec {
		s := rows.Spec{Alloc: "go", GOGC: gogc, Paced: paced && route == nil}
		if route != nil {
			s.Routes, s.Early = []replay.Route{*route}, early
		}
		return s
	}
	opt := rows.Options{Touch: true, MaxRequest: c.MaxRequest, MaxRSS: c.MaxRSS}
	byLabel := map[string]rows.Row{}
	run := func(specs []rows.Spec) error {
		table := rows.Run([]traces.Trace{c.Trace}, specs, opt, c.Jobs, nil)[0]
		adv.Replays += len(table.Rows)
		for _, r := range table.Rows {
			if r.ErrorKind == rows.KindInput {
				return fmt.Errorf("%w: %s: %s", replay.ErrSource, c.Trace.Label, r.Error)
			}
			byLabel[r.Allocator] = r
		}
		return nil
	}
	var specs []rows.Spec
	program := rows.Spec{Alloc: "go"} // collected where the program did
	if paced {
		specs = append(specs, program)
	}
	for _, g := range adv.GOGCs {
		specs = append(specs, at(g, nil, false))
	}
	if err := run(specs); err != nil {
		return nil, err
	}
	// measure gathers a replay's rows over the GOGCs.
	measure := func(route *replay.Route, early bool) Measured {
		var rs []rows.Row
		for _, g := range adv.GOGCs {
			rs = append(rs, byLabel[at(g, route, early).Label()])
		}
		return median(rs)
	}
	adv.Baseline = measure(nil, false)
	if paced {
		p := median([]rows.Row{byLabel[program.Label()]})
		adv.Program = &p
		if p.Error == "" && adv.Baseline.Error == "" {
			adv.ModelError = adv.Baseline.Peaks[0] - p.PeakRSS
		}
	}
	specs = nil
	for i := range cands {
		cd := &cands[i]
		cd.Rule = int64(cd.Bytes) * int64(c.GOGC) / 100
		if adv.Baseline.Error != "" {
			continue
		}
		// The most the move can save: what its bytes cost on the Go heap,
		// and their share of the rest of its RSS.
		// The trace's peak may hold more of the type than the replay's
		// peak live (the trace's frees at the marks' ends, the replay's
		// spread where the objects died): its share is at most all, and
		// no move saves more than the Go heap's whole peak RSS.
		cd.NoiseBound = int64(cd.Bytes) * int64(100+c.GOGC) / 100
		if live := adv.Baseline.PeakLive; live > 0 && adv.Baseline.PeakRSS > live {
			cd.NoiseBound += int64(min(float64(cd.Bytes)/float64(live), 1) * float64(adv.Baseline.PeakRSS-live))
		}
		cd.NoiseBound = min(cd.NoiseBound, adv.Baseline.PeakRSS)
		if cd.NoiseBound < MinTypeSaving {
			cd.Skipped = true
			continue
		}
		for _, g := range adv.GOGCs {
			for _, into := range cd.targets() {
				specs = append(specs, at(g, &replay.Route{Label: cd.Type, Into: into}, false))
				if paced {
					specs = append(specs, at(g, &replay.Route{Label: cd.Type, Into: into}, true))
				}
			}
		}
	}
	if len(specs) > 0 {
		if err := run(specs); err != nil {
			return nil, err
		}
	}
	for _, cd := range cands {
		if cd.Skipped || adv.Baseline.Error != "" {
			if adv.Baseline.Error != "" {
				cd.Error = "the Go heap failed: " + adv.Baseline.Error
			}
			adv.Tried = append(adv.Tried, cd)
			continue
		}
		pool, arena := replay.Route{Label: cd.Type}, replay.Route{Label: cd.Type, Into: replay.IntoArena}
		inPool, inArena := measure(&pool, false), measure(&arena, false)
		// A pool unless the arena is better at every GOGC: for objects
		// that do not die in bursts an arena is a pool that never reuses.
		// For objects of many sizes, a heap unless it saves less: one
		// heap is simpler code than a pool per size.
		cd.Measured, cd.Into = inPool, "pool"
		if inArena.Error == "" && (inPool.Error != "" || below(inArena.Peaks, inPool.Peaks)) {
			cd.Measured, cd.Into = inArena, "arena"
		}
		if cd.sizes {
			heap := replay.Route{Label: cd.Type, Into: replay.IntoHeap}
			if inHeap := measure(&heap, false); inHeap.Error == "" && (cd.Error != "" || inHeap.PeakRSS <= cd.PeakRSS) {
				cd.Measured, cd.Into = inHeap, "heap"
			}
		}
		if cd.Error == "" {
			var savings []int64
			cd.Saving, cd.SavingLow, cd.SavingHigh, savings = pairwise(adv.Baseline, cd.Measured)
			for _, d := range savings {
				if d > 0 {
					cd.Saved++
				}
			}
			cd.SavingRange = [2]int64{cd.SavingLow, cd.SavingHigh}
			if adv.Baseline.PeakRSS > 0 {
				cd.SavingPercent = 100 * float64(cd.Saving) / float64(adv.Baseline.PeakRSS)
			}
			cd.PlacementNoise = cd.Saving > cd.NoiseBound
			cd.SavingLowBytes, cd.SavingHighBytes = cd.Saving, cd.Saving
		}
		cd.Bounds = nil
		for _, into := range cd.targets() {
			r := replay.Route{Label: cd.Type, Into: into}
			late := measure(&r, false)
			b := Bound{Into: into.String(), PeakRSS: late.PeakRSS, Error: late.Error}
			if b.Error == "" {
				lo, _, _, _ := pairwise(adv.Baseline, late)
				b.SavingLowBytes, b.SavingHighBytes = lo, lo
			}
			if paced && b.Error == "" {
				early := measure(&r, true)
				b.Error = early.Error
				hi, _, _, _ := pairwise(adv.Baseline, early)
				b.SavingLowBytes, b.SavingHighBytes = min(b.SavingLowBytes, hi), max(b.SavingLowBytes, hi)
			}
			if b.Error != "" {
				b.SavingLowBytes, b.SavingHighBytes = 0, 0
			}
			if b.Into == cd.Into && cd.Error == "" && b.Error == "" {
				cd.Bounds = append([]Bound{b}, cd.Bounds...)
				if paced {
					cd.SavingLowBytes, cd.SavingHighBytes = b.SavingLowBytes, b.SavingHighBytes
				}
			} else {
				cd.Bounds = append(cd.Bounds, b)
			}
		}
		if cd.sizes {
			rounding, err := classRounding(c.Trace, cd.Type, cd.Bytes)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %w", replay.ErrSource, c.Trace.Label, err)
			}
			cd.Rounding = &rounding
		}
		adv.Tried = append(adv.Tried, cd)
	}
	// The best saving first; those not replayed last.
	slices.SortStableFunc(adv.Tried, func(a, b TypeTrial) int {
		return cmp.Or(cmpBool(a.Skipped, b.Skipped), cmp.Compare(b.Saving, a.Saving))
	})
	for _, t := range adv.Tried {
		if t.suggested(len(adv.GOGCs)) {
			adv.Suggested = append(adv.Suggested, t)
		}
	}
	adv.Assumes = []string{
		"objects die where the trace frees them: at the sweep after the collection that found them unreachable (the trace records no collections), not when the program dropped them; in a pool they are held as long as the Go heap held them, and a program that frees them itself frees them sooner",
		fmt.Sprintf("the Go heap runs in its child with no memory limit, a full collection each time its objects reach live × (1 + GOGC/100): a concurrent collector's overshoot is left out; where the collections fall moves a peak, so every replay is made at GOGC %s, each figure is the median, and a saving is counted at the same GOGC", joinInts(adv.GOGCs)),
		"a type's objects keep the sizes the trace gives them (their size classes): pools of those sizes hold what the program's would, and a pool of the type's own size would save the rounding too; a heap rounds a request to a few bytes, so where a type's objects come in many sizes its saving in a heap is under-stated by how far the classes are above the requests (said below the table)",
		"the rule \"a live byte costs 1 + GOGC/100 bytes on the Go heap and one in a pool\" is shown beside what was measured, not instead of it",
	}
	if paced {
		adv.Assumes[0] = "objects die at the end of the collection's mark that proved them dead (the trace's frees moved there from the sweep); a moved type's saving is a range: its low end frees the moved objects at the start of that mark, the latest they can have died (the mark finds what was reachable when it started), its high end as early as the trace allows (the later of their birth and the start of the mark before; for an object the trace never frees, of its birth and the start of the last mark), which a program that frees a buffer or value when it drops or replaces it comes near; the objects that stay on the Go heap die spread between the later of their birth and the start of the mark before, and the start of the mark that did not find them (the replays' collections fall between the program's, where the trace proves no object dead)"
		adv.Assumes[1] = fmt.Sprintf("the Go heap runs in its child with no memory limit, a full collection each time its objects reach the goal set at each of the program's collections: the program's marked heap less the moved objects its mark found, times how far the program's heap grew over its marked heap before its next mark ended (so the black allocation of its concurrent marks is the program's, less the moved objects'); a heap with fewer objects may mark faster and so allocate less black: the late bound keeps the program's marks as long as they were (a mark whose cost is all in the pointer bytes it scans), the early one shortens them by the moved objects' share of the objects they visited (a mark whose cost is all per object); the baseline is paced by the same model, whose own error (the paced baseline against the heap collected where the program collected) is printed; the repeats scale the ratio's excess over 1 by GOGC/100 at GOGC %s, which moves each collection by a fraction of a cycle, each figure is the median, a saving is counted at the same GOGC, and a saving above what the moved bytes cost on the Go heap is placement noise", joinInts(adv.GOGCs))
	}
	for i, t := range adv.Suggested {
		if t.Type == "uint8" && t.Into == "pool" {
			// The sizes a pool could serve (see poolCandidates).
			if adv.Suggested[i].Sizes, err = labelSizes(c.Trace, t.Type, uint64(pool.LinkSize), maxPoolChunk); err != nil {
				return nil, fmt.Errorf("%w: %s: %w", replay.ErrSource, c.Trace.Label, err)
			}
		}
	}
	adv.Go = goTypeSnippet(adv.Suggested)
	return adv, nil
}

// maxSizes bounds the distinct sizes labelSizes counts: a size first
// seen after that many is left out (a []byte's objects come in Go's size
// classes, about seventy, and page multiples above them).
const maxSizes = 1024

// labelSizes reads tr and returns the sizes from least to most that the
// objects labelled name come in, the most bytes allocated first (then
// the smaller size).
func labelSizes(tr traces.Trace, name string, least, most uint64) ([]SizeCount, error) {
	src, closer, err := tr.Open()
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	labels := trace.LabelsOf(src)
	is := map[uint32]bool{} // label number -> named name, as found
	counts := map[uint64]int64{}
	batch := make([]trace.Event, 1024)
	for {
		n, err := src.Read(batch)
		for _, e := range batch[:n] {
			if e.Label == 0 || (e.Op != trace.Alloc && e.Op != trace.Calloc && e.Op != trace.Memalign) {
				continue
			}
			match, seen := is[e.Label]
			if !seen {
				match = labels.Name(e.Label) == name
				is[e.Label] = match
			}
			if _, ok := counts[e.Size]; match && e.Size >= least && e.Size <= most && (ok || len(counts) < maxSizes) {
				counts[e.Size]++
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	var out []SizeCount
	for size, n := range counts {
		out = append(out, SizeCount{Size: int(size), Requests: n, Bytes: int64(size) * n})
	}
	slices.SortFunc(out, func(a, b SizeCount) int {
		return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), cmp.Compare(a.Size, b.Size))
	})
	return out, nil
}

// Quorum is how many of n pairs must save for a type to be suggested:
// four in five, rounded up (all of up to three, four of five, eight of
// ten).
func Quorum(n int) int { return (4*n + 4) / 5 }

// suggested reports whether a trial measured over pairs pairs is
// suggested: it saved at Quorum of them and MinTypeSaving in the median.
func (t TypeTrial) suggested(pairs int) bool {
	return t.Error == "" && !t.Skipped && t.Saved >= Quorum(pairs) && t.Saving >= MinTypeSaving && !t.PlacementNoise
}

// pairwise returns the savings of m against base at the same GOGC: their
// median, least and most, and each, sorted.
func pairwise(base, m Measured) (med, low, high int64, savings []int64) {
	for i, p := range m.Peaks {
		if i < len(base.Peaks) {
			savings = append(savings, base.Peaks[i]-p)
		}
	}
	if len(savings) == 0 {
		return 0, 0, 0, nil
	}
	slices.Sort(savings)
	return savings[len(savings)/2], savings[0], savings[len(savings)-1], savings
}

// ErrNoTypes is wrapped by AdviseTypes's error for a trace without
// labels: one not recorded from a Go program.
var ErrNoTypes = fmt.Errorf("advise: the trace names no types (record a Go program's own heap: carve record -- go test ...)")

// median returns the median peak RSS of a replay's repeats, their range
// and each, or the first error.
func median(rs []rows.Row) Measured {
	var m Measured
	for _, r := range rs {
		if r.Error != "" {
			m.Error = r.Error
			return m
		}
		m.Peaks = append(m.Peaks, r.PeakRSS)
		m.PeakLive = r.PeakLive
	}
	if len(m.Peaks) == 0 {
		m.Error = "no replay"
		return m
	}
	sorted := slices.Sorted(slices.Values(m.Peaks))
	m.PeakRSS, m.Low, m.High = sorted[len(sorted)/2], sorted[0], sorted[len(sorted)-1]
	m.Range = [2]int64{m.Low, m.High}
	return m
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// below reports whether every peak of a is below b's at the same GOGC.
func below(a, b []int64) bool {
	for i := range a {
		if a[i] >= b[i] {
			return false
		}
	}
	return len(a) > 0
}

// joinInts is "96, 98, 100, 102 and 104": the GOGCs in order.
func joinInts(v []int) string {
	v = slices.Sorted(slices.Values(v))
	var parts []string
	for _, n := range v {
		parts = append(parts, strconv.Itoa(n))
	}
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// goTypeSnippet writes the code that moves the suggested types off the Go
// heap, in the trace's names (a type is named with its package, as the
// program's own code would name it without).
func goTypeSnippet(ts []TypeTrial) string {
	if len(ts) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("// import \"github.com/carvelab/carve/pool\" (and \"github.com/carvelab/carve/arena\", \"github.com/carvelab/carve/heap\")\n")
	// made writes a declaration, its error's check, and how to use it.
	made := func(decl, use string) {
		fmt.Fprintf(&b, "%s\nif err != nil {\n\treturn err\n}\n", decl)
		if use != "" {
			b.WriteString(use + "\n")
		}
	}
	for i, t := range ts {
		pkg, name := splitType(t.Type)
		v := varName(name, i)
		in := ""
		if pkg != "" {
			in = " // in package " + pkg
		}
		switch {
		case t.Into == "heap" && t.Type == "uint8":
			made("bufs, err := heap.New() // []byte of every size in one carve heap (heap.Limit sets its most)",
				"defer bufs.Close()\n// b, err := bufs.Alloc(n, 1) instead of make([]byte, n); bufs.Free(b) where the program drops b, and before it replaces it")
		case t.Into == "heap":
			made(fmt.Sprintf("%s, err := heap.New() // %s objects of every size in one carve heap (heap.Limit sets its most)%s", v, name, in),
				fmt.Sprintf("defer %s.Close()\n// b, err := %s.Alloc(size, align) for each of them; %s.Free(b) where the program drops it", v, v, v))
		case t.Type == "uint8" && t.Into == "pool":
			bufferPools(&b, t.Sizes, made)
		case t.Type == "uint8":
			made("bufs, err := arena.New() // []byte buffers allocated and dropped together",
				"// b, err := bufs.Alloc(n, 1) instead of make([]byte, n); bufs.Reset() when the last of a burst is done")
		case t.Into == "arena":
			ar := strings.TrimSuffix(v, "s") + "Arena"
			made(fmt.Sprintf("%s, err := arena.New()%s", ar, in), "")
			made(fmt.Sprintf("%s, err := arena.NewOf[%s](%s)", v, name, ar),
				fmt.Sprintf("// x, err := %s.New() instead of new(%s); %s.Reset() when the last of a burst is done", v, name, ar))
		default:
			made(fmt.Sprintf("%s, err := pool.NewOf[%s]()%s", v, name, in),
				fmt.Sprintf("// x, err := %s.New() instead of new(%s); %s.Free(x) where the program drops it", v, name, v))
		}
	}
	return b.String()
}

// maxPools is how many buffer pools the code makes for a []byte at the
// most: the sizes with the most bytes.
const maxPools = 4

// bufferPools writes the pools for a []byte's sizes (the most bytes
// first): one per size, up to maxPools, and says what the rest are.
func bufferPools(b *strings.Builder, sizes []SizeCount, made func(decl, use string)) {
	var total int64
	for _, s := range sizes {
		total += s.Bytes
	}
	if len(sizes) == 0 || total == 0 {
		made("bufs, err := pool.New(size) // []byte buffers: a pool per size the program asks for", "")
		return
	}
	var covered int64
	for i, s := range sizes[:min(len(sizes), maxPools)] {
		v := fmt.Sprintf("buf%d", s.Size)
		covered += s.Bytes
		use := ""
		if i == 0 {
			use = fmt.Sprintf("// b, err := %s.Alloc() instead of make([]byte, %d); %s.Free(b) where the program drops it", v, s.Size, v)
		}
		made(fmt.Sprintf("%s, err := pool.New(%d) // []byte of %d B: %d allocations, %.0f%% of the type's bytes", v, s.Size, s.Size, s.Requests, 100*float64(s.Bytes)/float64(total)), use)
	}
	if n := len(sizes) - maxPools; n > 0 {
		fmt.Fprintf(b, "// %s (%.0f%% of the bytes) stay with make\n", text.Count(int64(n), "other size"), 100*float64(total-covered)/float64(total))
	}
}

// Movable reports whether a program can move the objects of a type as
// a trace names it to carve memory: not the runtime's own (package
// runtime, internal packages) nor the compiler's (a map's groups and
// tables, a closure's context), which no code of the program allocates
// by name.
func Movable(name string) bool {
	t := strings.TrimLeft(name, "*[]0123456789")
	for _, p := range []string{"runtime.", "internal/", "map.", "noalg.", "struct { F uintptr"} {
		if strings.HasPrefix(t, p) {
			return false
		}
	}
	return true
}

// varName is the snippet's name for the pool or arena of the type named
// name, the i-th suggested: "sessions" for session; for a type whose
// name is no identifier ("[16]uint8", "[]main.point"), "pool1" and on.
func varName(name string, i int) string {
	ident := name != ""
	for j, r := range name {
		if !(r == '_' || unicode.IsLetter(r) || j > 0 && unicode.IsDigit(r)) {
			ident = false
			break
		}
	}
	if !ident {
		return fmt.Sprintf("pool%d", i+1)
	}
	r, n := utf8.DecodeRuneInString(name)
	return string(unicode.ToLower(r)) + name[n:] + "s"
}

// splitType returns the package and the name of a Go type as a trace
// names it: "goconn.session" is goconn, session; "uint8" has no package.
func splitType(t string) (pkg, name string) {
	if i := strings.LastIndexByte(t, '.'); i > 0 && !strings.ContainsAny(t[:i], "[]*(){} ") {
		return t[:i], t[i+1:]
	}
	return "", t
}

// quorum says how many GOGCs a suggestion must save at: "every GOGC" or
// "4 or more of the 5 GOGCs".
func (a *TypeAdvice) quorum() string {
	n := len(a.GOGCs)
	if q := Quorum(n); q < n {
		return fmt.Sprintf("%d or more of the %d GOGCs", q, n)
	}
	return "every GOGC"
}

// WriteText writes the type advice for a reader.
func (a *TypeAdvice) WriteText(w io.Writer) error {
	ew := &firstErrWriter{w: w}
	ew.printf("carve advise: %s, a Go program's types moved off the Go heap (%s)\n", a.Trace, a.Base)
	ew.printf("every replay of the whole trace is made at GOGC %s, in a child process each: %d replays; figures are medians\n", joinInts(a.GOGCs), a.Replays)
	if a.Baseline.Error != "" {
		ew.printf("\nthe Go heap failed on the trace: %s\n", a.Baseline.Error)
		return ew.err
	}
	ew.printf("the Go heap: peak RSS %s (%s to %s), peak live %s (%.3f)\n", size.Format(a.Baseline.PeakRSS), size.Format(a.Baseline.Low), size.Format(a.Baseline.High),
		size.Format(a.Baseline.PeakLive), fpOverLive(a.Baseline.PeakRSS, a.Baseline.PeakLive))
	if p := a.Program; p != nil && p.Error == "" {
		ew.printf("  paced by the model; collected where the program collected: peak RSS %s, so the model's error is %s (%+.1f%%)\n",
			size.Format(p.PeakRSS), signed(a.ModelError), 100*float64(a.ModelError)/float64(max(p.PeakRSS, 1)))
	}
	ew.printf("\n")
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "type\tat the trace's peak\tobjects\tinto\tpeak RSS\tsaving\t(at each GOGC)\tsaved at\tbounds: freed late to early\tat most\t\n")
	for _, t := range a.Tried {
		if t.Skipped {
			fmt.Fprintf(tw, "%s\t%s\t%d\t\tnot replayed\t\t\t\t\t%s\t\n", t.Type, size.Format(int64(t.Bytes)), t.Objects, size.Format(t.NoiseBound))
			continue
		}
		if t.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\t%d\t\tfailed: %s\t\t\t\t\t\t\n", t.Type, size.Format(int64(t.Bytes)), t.Objects, t.Error)
			continue
		}
		bounds := "-"
		if a.Paced && len(t.Bounds) > 0 {
			bounds = signed(t.SavingLowBytes) + " to " + signed(t.SavingHighBytes)
		}
		noise := ""
		if t.PlacementNoise {
			noise = " noise"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s (%.1f%%)%s\t%s to %s\t%d of %d\t%s\t%s\t\n", t.Type, size.Format(int64(t.Bytes)), t.Objects, t.Into, size.Format(t.PeakRSS),
			signed(t.Saving), t.SavingPercent, noise, signed(t.SavingLow), signed(t.SavingHigh), t.Saved, len(a.GOGCs), bounds, size.Format(t.NoiseBound))
	}
	tw.Flush()
	ew.printf("  at the trace's peak: the type's bytes where the trace's live bytes peak, its frees at the marks' ends (the Go heap's peak live above is its replay's, frees spread where the objects died)\n")
	ew.printf("  at most: what the moved bytes cost on the Go heap, × (1 + GOGC/100), and their share of its RSS above peak live, never more than its peak RSS; a saving above it is placement noise (where the re-paced collections fell), never suggested\n")
	if a.Paced {
		ew.printf("  bounds: the saving with the moved objects freed at the start of the mark that did not find them, the latest they can have died (late), and as early as the trace allows (early: a program that frees them when it drops them comes near it)\n")
	}
	if a.skipped() {
		ew.printf("  not replayed: a type whose move can save at most less than %s, the least a suggestion needs\n", size.Format(MinTypeSaving))
	}
	if lines := a.otherTargets(); len(lines) > 0 {
		ew.printf("\nevery target measured (saving of peak RSS%s):\n", map[bool]string{true: ", freed late to early", false: ""}[a.Paced])
		for _, l := range lines {
			ew.printf("  %s\n", l)
		}
	}
	if len(a.Refused) > 0 {
		ew.printf("\ntypes that hold pointers stay on the Go heap:\n")
		for _, r := range a.Refused {
			ew.printf("  %s (%s at the peak): %s\n", r.Type, size.Format(int64(r.Bytes)), r.Why)
		}
	}
	ew.printf("\nthe figures assume:\n")
	for _, s := range a.Assumes {
		ew.printf("  - %s\n", s)
	}
	if len(a.Suggested) == 0 {
		ew.printf("\nno type suggested: none saved peak RSS at %s, by %s or more in the median\n", a.quorum(), size.Format(MinTypeSaving))
		return ew.err
	}
	ew.printf("\nsuggested (a saving at %s, %s or more in the median):\n", a.quorum(), size.Format(MinTypeSaving))
	for _, t := range a.Suggested {
		ew.printf("  %s into %s: peak RSS %s below the Go heap's (%.1f%%)", t.Type, article(t.Into), size.Format(t.Saving), t.SavingPercent)
		if a.Paced && len(t.Bounds) > 0 {
			ew.printf(", %s to %s as the program frees them late or early", size.Format(t.SavingLowBytes), size.Format(t.SavingHighBytes))
		}
		ew.printf("; the GOGC rule predicted %s\n", size.Format(t.Rule))
	}
	ew.printf("\n")
	for line := range strings.Lines(a.Go) {
		ew.printf("\t%s", line)
	}
	return ew.err
}

// skipped reports whether a candidate was not replayed.
func (a *TypeAdvice) skipped() bool {
	for _, t := range a.Tried {
		if t.Skipped {
			return true
		}
	}
	return false
}

// otherTargets says, for each type tried in more than one target, its
// saving into each: "uint8: into a pool 48.60 MiB to 87.67 MiB, into an
// arena ..., into a heap ...".
func (a *TypeAdvice) otherTargets() []string {
	var lines []string
	for _, t := range a.Tried {
		if len(t.Bounds) < 2 {
			continue
		}
		var parts []string
		for _, b := range t.Bounds {
			p := "into " + article(b.Into) + " " + signed(b.SavingLowBytes)
			switch {
			case b.Error != "":
				p = "into " + article(b.Into) + " failed: " + b.Error
			case a.Paced:
				p += " to " + signed(b.SavingHighBytes)
			}
			parts = append(parts, p)
		}
		lines = append(lines, t.Type+": "+strings.Join(parts, ", "))
		if r := t.Rounding; r != nil {
			lines = append(lines, fmt.Sprintf("  in a heap, its objects are replayed at the sizes the trace gives them, Go's size classes, where the program asked for n bytes: "+
				"the classes are %.1f%% above the requests if these spread evenly within each class (%.1f%% at the most), "+
				"about %s of its %s at the peak, by which a heap's saving is under-stated", r.EvenPercent, r.MostPercent, size.Format(r.AtPeak), size.Format(int64(t.Bytes))))
		}
	}
	return lines
}

// article is "a pool", "an arena" or "a heap".
func article(into string) string {
	if into == "arena" {
		return "an arena"
	}
	return "a " + into
}

// Labelled reports whether the trace's objects carry labels (a Go
// program's types), from its first events: the trace AdviseTypes is for.
func Labelled(t traces.Trace) bool {
	src, closer, err := t.Open()
	if err != nil {
		return false
	}
	defer closer.Close()
	buf := make([]trace.Event, 4096)
	for range 16 {
		n, err := src.Read(buf)
		for _, e := range buf[:n] {
			if e.Label != 0 {
				return true
			}
		}
		if err != nil {
			return false
		}
	}
	return false
}

// signed formats a saving that may be negative: "-1.20 MiB".
func signed(n int64) string {
	if n < 0 {
		return "-" + size.Format(-n)
	}
	return size.Format(n)
}
