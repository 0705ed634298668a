package advise

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/carvelab/carve/internal/size"
	"github.com/carvelab/carve/internal/text"
	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/rows"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/trace/summary"
	"github.com/carvelab/carve/lab/traces"
)

// Advice for a Go program: which of its types to move off the Go heap.
// The base is the Go heap itself (the go row, replayed in a Go child of
// its own, its collections where the pacer aims them); each candidate, a
// pointer-free type above the Floor, is replayed over the whole trace in
// each Move that fits it (moves: a struct of one size in pool.NewOf[T]
// and in a heap, a slice in a heap and in a pool per size), its objects
// routed there (replay.WithRoutes); the saving in the headline, peak
// RSS, ranks them, and the code printed is made from the Move measured
// (Code). Only pointer-free types can move: the collector does not look
// inside carve memory.
//
// Where the collections fall moves a Go heap's peak by more than a small
// type weighs: a few hundred kilobytes either way from a collection that
// comes a little earlier or later. So every replay is made Repeats times,
// at GOGC a little apart (the row's, then GOGCStep below and above it,
// then twice that...), and a candidate's saving is measured pairwise, the
// Go heap's peak less the candidate's at the same GOGC: a move is
// suggested only when its lower bound's median saving is at least
// MinTypeSaving and the pairs whose lower bound saves are at least four
// in five (Quorum; Rule says it all). One pair may
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
// Each move is then replayed twice, every object (moved or not) freed
// late (at the start of the mark that did not find it, the latest it
// can have died: trace.FreeMarkStart), the program's marks as long as
// they were, and early (as early as the trace allows: trace.EarlyFrees),
// the marks shorter by the moved objects' share of what they visited:
// the least and the most the what-if can hold, whatever moment in its
// span each object died at, which bound the saving of a program that
// frees the moved objects itself. (With a large type gone, the what-if
// collects far more often than the program did, and where in its span
// an object left on the Go heap died moves its peak as much as the moved
// objects do.) A median saving above what the moved bytes cost on
// the Go heap (NoiseBound) is placement noise, never suggested.

// GOGCStep is how far apart the repeats' GOGCs are, and MinTypeSaving
// the least median saving of peak RSS a type is suggested for (its lower
// bound's, on a trace that records the program's collections).
const (
	GOGCStep      = 2
	MinTypeSaving = 64 << 10
)

// The floor of a candidate: a type is tried only when its bytes at the
// trace's peak are at least DefaultFloor.Bytes and DefaultFloor.Percent
// of the peak marked heap (of peak live, on a trace without
// collections): a type below it cannot save more than placement noise.
var DefaultFloor = Floor{Bytes: 1 << 20, Percent: 1}

// Floor is the least a type must hold at the trace's peak to be tried.
type Floor struct {
	Bytes   int64
	Percent float64
}

// String is the floor as --min-type spells it: "1%,1MiB", or "0".
func (f Floor) String() string {
	var parts []string
	if f.Percent > 0 {
		parts = append(parts, strconv.FormatFloat(f.Percent, 'g', -1, 64)+"%")
	}
	switch {
	case f.Bytes > 0 && f.Bytes%(1<<20) == 0:
		parts = append(parts, strconv.FormatInt(f.Bytes>>20, 10)+"MiB")
	case f.Bytes > 0 && f.Bytes%(1<<10) == 0:
		parts = append(parts, strconv.FormatInt(f.Bytes>>10, 10)+"KiB")
	case f.Bytes > 0:
		parts = append(parts, strconv.FormatInt(f.Bytes, 10))
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, ",")
}

// ParseFloor reads a floor as --min-type spells it: a percentage of the
// peak marked heap, a size (1MiB, 65536), both joined by a comma, or 0
// for none.
func ParseFloor(s string) (Floor, error) {
	var f Floor
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if pc, ok := strings.CutSuffix(part, "%"); ok {
			v, err := strconv.ParseFloat(pc, 64)
			if err != nil || v < 0 || v > 100 {
				return Floor{}, fmt.Errorf("%q: want a percentage from 0%% to 100%%", part)
			}
			f.Percent = v
			continue
		}
		n, err := size.Parse(part)
		if err != nil || n < 0 {
			return Floor{}, fmt.Errorf("%q: want a size (1MiB, 65536) or a percentage (1%%)", part)
		}
		f.Bytes = n
	}
	return f, nil
}

// least returns the floor's bytes for a trace whose peak marked heap
// (or peak live) is peak.
func (f Floor) least(peak uint64) uint64 {
	return max(uint64(f.Bytes), uint64(f.Percent/100*float64(peak)))
}

// MaxRepeats bounds TypeConfig.Repeats: each repeat is another replay of
// the Go heap (three, placed three ways, on a trace of collections) and
// two of each candidate's moves.
const MaxRepeats = 50

// TypesSchema names the version of the JSON of a TypeAdvice.
const TypesSchema = "carve.advise-types/v4"

// TypeConfig is what to advise on for a labelled trace (a Go execution
// trace), and how.
type TypeConfig struct {
	Trace traces.Trace
	// GOGC is the go row's (0: rows.DefaultGOGC).
	GOGC int
	// Candidates is how many pointer-free types at or above the Floor
	// (or sites of a type tried site by site), by their bytes at the
	// trace's peak, are tried (5 when 0); Repeats
	// how many times each replay is made, at GOGCs GOGCStep apart around
	// GOGC (5 when 0, at most MaxRepeats); Jobs the replays at once (1
	// when 0).
	Candidates, Repeats, Jobs int
	// Floor is the least a type holds at the trace's peak to be tried
	// (DefaultFloor when nil).
	Floor *Floor
	// MaxRequest and MaxRSS are the rows' budgets (rows.Options).
	MaxRequest, MaxRSS int64
	// Progress counts the replays as they run (nil: none); its Total is
	// set before the first.
	Progress *rows.Progress
	// Planned, when not nil, is called with the number of replays before
	// the first.
	Planned func(replays int)
}

// TypeAdvice is what the advisor measured for a Go trace.
type TypeAdvice struct {
	Schema  string `json:"schema"`
	Trace   string `json:"trace"`
	Base    string `json:"base"`
	GOGC    int    `json:"gogc"`
	Repeats int    `json:"repeats"`
	// Candidates is how many types at or above the floor were tried at
	// most (TypeConfig.Candidates).
	Candidates int `json:"candidates"`
	// GOGCs are the repeats' GOGCs, the row's first.
	GOGCs   []int `json:"gogcs"`
	Replays int   `json:"replays"`
	// Floor is the least a type held at the trace's peak to be tried,
	// FloorBytes what it came to on this trace, PeakMarked the peak
	// marked heap it is a share of (peak live on a trace without
	// collections).
	Floor      string `json:"floor"`
	FloorBytes int64  `json:"floor_bytes"`
	PeakMarked int64  `json:"peak_marked"`
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
	Paced   bool      `json:"paced"`
	Program *Measured `json:"program_collected,omitempty"`
	// BaselineLate and BaselineEarly are, with Paced, the Go heap alone
	// with every free placed as a what-if's late and early bounds place
	// them: each bound's saving is taken against the one placed alike.
	BaselineLate  *Measured `json:"baseline_late,omitempty"`
	BaselineEarly *Measured `json:"baseline_early,omitempty"`
	ModelError    int64     `json:"model_error_bytes"`
	// Tried are the candidates, the best lower bound first.
	Tried []TypeTrial `json:"tried"`
	// Suggested are the candidates whose move passed the rule
	// (TypeTrial.Suggested), in the order of Tried.
	Suggested []TypeTrial `json:"suggested"`
	// Unproven are the candidates not suggested whose move's upper bound
	// (freed early) passes the rule where its lower bound does not, and
	// is above how far the Go heap's peak moves from GOGC to GOGC: the
	// trace cannot tell when in a collection cycle the program dropped
	// them, and a program that frees them as soon as it drops them may
	// save up to the upper bound; GoUnproven is their code.
	Unproven   []TypeTrial `json:"unproven"`
	GoUnproven string      `json:"go_unproven,omitempty"`
	// Refused are the types that hold pointers, by bytes at the peak,
	// and why they cannot move (the first ten).
	Refused []Refused `json:"refused"`
	// Left are the objects never tried, summed by why: the runtime's and
	// the testing package's own types, the objects of no type, the
	// pointer-free types under the Floor, and those past Candidates.
	Left []Left `json:"left"`
	// Untyped says the objects of no type held more than a tenth of the
	// trace's peak: the figures cover the typed objects only.
	Untyped bool `json:"untyped_over_a_tenth,omitempty"`
	// Assumes says what the figures assume.
	Assumes []string `json:"assumes"`
	Go      string   `json:"go"` // the code that makes the suggested moves
}

// Left is a set of objects the advisor did not try: their types, their
// objects and bytes at the trace's peak, and why.
type Left struct {
	Why     string `json:"why"`
	Types   int    `json:"types"`
	Objects int64  `json:"objects_at_peak"`
	Bytes   uint64 `json:"bytes_at_peak"`
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

// TypeTrial is one type moved off the Go heap, measured into each target
// that fits it (Targets), the one printed first.
type TypeTrial struct {
	// Type is the type's Go name ([]byte for a uint8 label whose objects
	// hold many), Label the trace's.
	Type  string `json:"type"`
	Label string `json:"label"`
	// Site, for a type tried site by site (SiteShare), is where these
	// of its objects were allocated (trace.AttrSite).
	Site     string  `json:"site,omitempty"`
	Size     int64   `json:"size"` // the type's size; 1 for a []byte's uint8
	Objects  int64   `json:"objects_at_peak"`
	Bytes    uint64  `json:"bytes_at_peak"`
	Allocs   int64   `json:"allocs"`
	MeanLife float64 `json:"mean_life_events"`
	// Sizes are the sizes the trace gives its objects (their size
	// classes), the most bytes first.
	Sizes []SizeCount `json:"sizes"`
	// Rule is what "a live byte costs 1 + GOGC/100 on the Go heap and
	// one in a pool" predicts: Bytes × GOGC/100.
	Rule int64 `json:"rule_predicts"`
	// NoiseBound is the most a move can save: the moved bytes at the
	// peak × (1 + GOGC/100) plus their share of the baseline's peak RSS
	// above its peak live, and never more than the baseline's peak RSS.
	// A lower bound above it is placement noise (where the re-paced
	// collections fell), never suggested.
	NoiseBound int64 `json:"noise_bound_bytes"`
	// Targets are the moves measured, the one chosen first (Choose).
	Targets []Target `json:"targets"`
	// Rounding is, for a type whose objects come in more than one size,
	// how far the trace's sizes, Go's size classes, are above the
	// requests they stand for: what a heap, which rounds a request to a
	// few bytes, would hold less.
	Rounding *ClassRounding `json:"class_rounding,omitempty"`
	// Suggested says the chosen move passed the rule: its lower bound
	// above zero at Quorum of the GOGCs or more, at least MinTypeSaving
	// in the median and no more than NoiseBound.
	Suggested bool   `json:"suggested"`
	Error     string `json:"error,omitempty"`
}

// Target is one move of a type measured: the move (its route and its
// code), and its saving of peak RSS against the Go heap at the same GOGC.
type Target struct {
	Move Move `json:"move"`
	// Late is the move replayed with every object freed at the start of
	// the mark that did not find it (the latest it can have died)
	// and the marks as long as the program's; Early with them freed as
	// early as the trace allows and the marks shorter by what moved (on a
	// trace without collections, Early is Late).
	Late  Measured `json:"late"`
	Early Measured `json:"early"`
	// Low and High bound the saving, the medians of the pairwise savings
	// of the two replays (the least first); Lows and Highs are, at each
	// GOGC, the lesser and the greater of the two, and Saved how many of
	// Lows are above zero.
	Low   int64   `json:"saving_low_bytes"`
	High  int64   `json:"saving_high_bytes"`
	Lows  []int64 `json:"saving_lows"`
	Highs []int64 `json:"saving_highs"`
	Saved int     `json:"saved_at"`
	// LowPercent is Low over the baseline's peak RSS, in percent.
	LowPercent float64 `json:"saving_low_percent"`
	// Rounding, for a heap move of a type of many sizes, is what High
	// and Highs count above the replays: the most a heap given the
	// program's requests holds less than the size classes the trace
	// gives (see rounded).
	Rounding int64 `json:"rounding_bytes,omitempty"`
	// Error says why a replay of the move failed (an arena that never
	// resets outgrowing the row's budget, say): its savings are 0.
	Error string `json:"error,omitempty"`
}

// Chosen returns the trial's printed move: its first target.
func (t TypeTrial) Chosen() *Target {
	if len(t.Targets) == 0 || t.Error != "" {
		return nil
	}
	return &t.Targets[0]
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

// classRounding measures the class rounding of a type's objects, of
// the sizes the trace gives them, whose bytes at the trace's peak are
// atPeak.
func classRounding(sizes []SizeCount, atPeak uint64) ClassRounding {
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
	return r
}

// pointersWhy is why a type that holds pointers cannot move: said in
// each Refused.Why, and once above the text's short list of them.
const pointersWhy = "the collector does not look inside carve memory, so what they point to could be freed under it"

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
	floor := DefaultFloor
	if c.Floor != nil {
		floor = *c.Floor
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
	sum, err := summary.OfSource(src)
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
	adv := &TypeAdvice{Schema: TypesSchema, Trace: c.Trace.Label, Base: base.Label(), GOGC: c.GOGC, Repeats: c.Repeats, Candidates: c.Candidates, Paced: paced,
		Floor: floor.String(), Tried: []TypeTrial{}, Suggested: []TypeTrial{}, Unproven: []TypeTrial{}, Refused: []Refused{}, Left: []Left{}}
	peak := sum.PeakMarked
	if peak == 0 {
		peak = sum.PeakLive
	}
	adv.PeakMarked = int64(peak)
	adv.FloorBytes = int64(floor.least(peak))
	cands := candidates(sum.Labels, sum.TypeSites, adv, floor.least(peak), c.Candidates)
	if len(cands) > 0 {
		names := make([]string, len(cands))
		for i, cd := range cands {
			names[i] = cd.moved()
		}
		sizes, err := labelSizes(c.Trace, names)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", replay.ErrSource, c.Trace.Label, err)
		}
		for i := range cands {
			cands[i].Sizes = sizes[cands[i].moved()]
		}
	}

	for r := range c.Repeats {
		step := (r + 1) / 2 * GOGCStep
		if r%2 == 1 {
			step = -step
		}
		adv.GOGCs = append(adv.GOGCs, max(c.GOGC+step, 1))
	}
	// at is a replay at gogc: the Go heap alone (m nil), its frees
	// spread (the baseline) or, with bound, placed as a what-if's late
	// or early bound places them; or m's what-if, late or early.
	at := func(gogc int, m *Move, bound placement) rows.Spec {
		s := rows.Spec{Alloc: "go", GOGC: gogc, Paced: paced && m == nil}
		switch {
		case m != nil:
			s.Routes, s.Early = []replay.Route{m.Route()}, paced && bound == early
		case paced:
			s.Late, s.Early = bound == late, bound == early
		}
		return s
	}
	// Every replay, planned before the first: the Go heap alone at each
	// GOGC (and, paced, once collected where the program collected),
	// then each move of each candidate at each GOGC, freed late and, on
	// a trace of collections, early.
	var specs []rows.Spec
	program := rows.Spec{Alloc: "go"}
	if paced {
		specs = append(specs, program)
	}
	for _, g := range adv.GOGCs {
		specs = append(specs, at(g, nil, spread))
		if paced {
			specs = append(specs, at(g, nil, late), at(g, nil, early))
		}
	}
	for i := range cands {
		cd := &cands[i]
		for _, m := range moves(*cd) {
			cd.Targets = append(cd.Targets, Target{Move: m})
			for _, g := range adv.GOGCs {
				specs = append(specs, at(g, &m, late))
				if paced {
					specs = append(specs, at(g, &m, early))
				}
			}
		}
	}
	if c.Planned != nil {
		c.Planned(len(specs))
	}
	if c.Progress != nil {
		c.Progress.Total = len(specs)
	}
	// The replays skip the correctness checks: the advisor measures, the
	// lab checks.
	opt := rows.Options{Touch: true, NoCheck: true, MaxRequest: c.MaxRequest, MaxRSS: c.MaxRSS}
	table := rows.Run([]traces.Trace{c.Trace}, specs, opt, c.Jobs, c.Progress)[0]
	adv.Replays = len(table.Rows)
	byLabel := map[string]rows.Row{}
	for _, r := range table.Rows {
		if r.ErrorKind == rows.KindInput {
			return nil, fmt.Errorf("%w: %s: %s", replay.ErrSource, c.Trace.Label, r.Error)
		}
		byLabel[r.Allocator] = r
	}
	// measure gathers a replay's rows over the GOGCs.
	measure := func(m *Move, bound placement) Measured {
		var rs []rows.Row
		for _, g := range adv.GOGCs {
			rs = append(rs, byLabel[at(g, m, bound).Label()])
		}
		return median(rs)
	}
	adv.Baseline = measure(nil, spread)
	baseLate, baseEarly := adv.Baseline, adv.Baseline
	if paced {
		baseLate, baseEarly = measure(nil, late), measure(nil, early)
		adv.BaselineLate, adv.BaselineEarly = &baseLate, &baseEarly
	}
	if paced {
		p := median([]rows.Row{byLabel[program.Label()]})
		adv.Program = &p
		if p.Error == "" && adv.Baseline.Error == "" {
			adv.ModelError = adv.Baseline.Peaks[0] - p.PeakRSS
		}
	}
	for _, cd := range cands {
		cd.Rule = int64(cd.Bytes) * int64(c.GOGC) / 100
		if adv.Baseline.Error != "" {
			cd.Error = "the Go heap failed: " + adv.Baseline.Error
			adv.Tried = append(adv.Tried, cd)
			continue
		}
		cd.NoiseBound = noiseBound(cd.Bytes, c.GOGC, adv.Baseline)
		if len(cd.Sizes) > 1 {
			rounding := classRounding(cd.Sizes, cd.Bytes)
			cd.Rounding = &rounding
		}
		for i := range cd.Targets {
			tg := &cd.Targets[i]
			tg.Late = measure(&tg.Move, late)
			tg.Early = tg.Late
			if paced {
				tg.Early = measure(&tg.Move, early)
			}
			tg.bound(baseLate, baseEarly)
			if r := cd.Rounding; r != nil && tg.Move.Into == replay.IntoHeap && tg.Error == "" {
				tg.rounded(int64(r.MostPercent / 100 * float64(cd.Bytes)))
			}
		}
		cd.choose(len(adv.GOGCs))
		cd.Suggested = cd.passes(len(adv.GOGCs))
		adv.Tried = append(adv.Tried, cd)
	}
	// The best lower bound first.
	slices.SortStableFunc(adv.Tried, func(a, b TypeTrial) int {
		return cmp.Compare(b.low(), a.low())
	})
	var moved, unproven []Move
	for _, t := range adv.Tried {
		switch {
		case t.Suggested:
			adv.Suggested = append(adv.Suggested, t)
			moved = append(moved, t.Chosen().Move)
		case paced && t.mayPass(len(adv.GOGCs), adv.Baseline.High-adv.Baseline.Low):
			adv.Unproven = append(adv.Unproven, t)
			unproven = append(unproven, t.Chosen().Move)
		}
	}
	adv.Assumes = assumes(paced, adv.GOGCs)
	adv.Go, adv.GoUnproven = Code(moved), Code(unproven)
	return adv, nil
}

// candidates sorts the trace's labels into the types to try (the first n
// pointer-free ones holding at least least bytes at the peak, by those
// bytes) and the rest: adv's Refused (types with pointers) and Left. A
// type most of whose bytes at the peak have a site (typeSites: its
// objects at each site) is tried site by site (SiteShare), each site
// that holds least bytes of it.
func candidates(labels, typeSites []summary.LabelStat, adv *TypeAdvice, least uint64, n int) []TypeTrial {
	at := map[string][]summary.LabelStat{}
	for _, ts := range typeSites {
		at[ts.Name] = append(at[ts.Name], ts)
	}
	var cands []TypeTrial
	left := map[string]*Left{}
	var order []string
	leave := func(why string, l summary.LabelStat) {
		if left[why] == nil {
			left[why] = &Left{Why: why}
			order = append(order, why)
		}
		lt := left[why]
		lt.Types++
		lt.Objects += l.Objects
		lt.Bytes += l.Bytes
	}
	for _, l := range labels {
		switch {
		case l.Bytes == 0:
		case l.Name == "":
			leave(LeftUntyped, l)
			if l.Share > UntypedShare {
				adv.Untyped = true
			}
		case !Movable(l.Name):
			leave(LeftRuntime, l)
		case l.PtrBytes != 0:
			why := "its type is unknown to the trace"
			if l.PtrBytes > 0 {
				why = fmt.Sprintf("%d of its %d bytes may hold Go pointers: %s", l.PtrBytes, l.Size, pointersWhy)
			}
			if len(adv.Refused) < 10 {
				adv.Refused = append(adv.Refused, Refused{Type: l.GoName(), Bytes: l.Bytes, PtrBytes: l.PtrBytes, Size: l.Size, Why: why})
			}
		case l.Bytes < least:
			leave(LeftFloor, l)
		case len(cands) == n:
			leave(LeftCandidates, l)
		case sited(at[l.Name]) >= SiteShare*float64(l.Bytes):
			for _, ts := range at[l.Name] {
				switch {
				case ts.Bytes < least:
					leave(LeftFloor, ts)
				case len(cands) == n:
					leave(LeftCandidates, ts)
				default:
					cands = append(cands, TypeTrial{Type: l.GoName(), Label: l.Name, Site: ts.Site, Size: l.Size, Objects: ts.Objects, Bytes: ts.Bytes, Allocs: ts.Allocs, MeanLife: ts.MeanLife})
				}
			}
		default:
			cands = append(cands, TypeTrial{Type: l.GoName(), Label: l.Name, Size: l.Size, Objects: l.Objects, Bytes: l.Bytes, Allocs: l.Allocs, MeanLife: l.MeanLife})
		}
	}
	for _, why := range order {
		adv.Left = append(adv.Left, *left[why])
	}
	return cands
}

// SiteShare is the share of a type's bytes at the trace's peak that must
// have a site for the type to be tried site by site.
const SiteShare = 0.5

// sited sums the bytes at the peak of a type's objects at its sites.
func sited(at []summary.LabelStat) float64 {
	var b uint64
	for _, ts := range at {
		b += ts.Bytes
	}
	return float64(b)
}

// moved names the trial's objects as trace.MovedBy reads them: its
// type's label, or its type's at its site.
func (t TypeTrial) moved() string {
	if t.Site != "" {
		return trace.MovedAt(t.Label, t.Site)
	}
	return t.Label
}

// name is the trial as the advice names it: "[]byte", or "[]byte at
// main.(*Cache).Set (cache.go:88)".
func (t TypeTrial) name() string {
	if t.Site != "" {
		return t.Type + " at " + t.Site
	}
	return t.Type
}

// Why objects were left untried (Left.Why), and the share of the trace's
// peak (of its live bytes) above which the objects of no type make the
// figures the typed objects' only.
const (
	LeftUntyped    = "objects of no type: alive when the trace started, the runtime's snapshot gave no type"
	LeftRuntime    = "the runtime's and the testing package's own types, which no code of the program allocates by name"
	LeftFloor      = "pointer-free types under the floor"
	LeftCandidates = "pointer-free types past --types"
	UntypedShare   = 0.10
)

// noiseBound is the most moving bytes (at the trace's peak) can save
// against base at gogc: what they cost on the Go heap, and their share of
// the rest of its RSS. The trace's peak may hold more of a type than the
// replay's peak live (the trace's frees at the marks' ends, the replay's
// spread where the objects died): the share is at most all, and no move
// saves more than the Go heap's whole peak RSS.
func noiseBound(bytes uint64, gogc int, base Measured) int64 {
	n := int64(bytes) * int64(100+gogc) / 100
	if live := base.PeakLive; live > 0 && base.PeakRSS > live {
		n += int64(min(float64(bytes)/float64(live), 1) * float64(base.PeakRSS-live))
	}
	return min(n, base.PeakRSS)
}

// rounded raises a heap move's upper bound by what its replay cannot
// see: the trace sizes each object by its size class, and a heap given
// the program's n bytes holds up to by less (ClassRounding: the most the
// classes can be above the requests, of the type's bytes at the peak).
// The lower bound keeps the classes: the program's requests may fill
// them.
func (tg *Target) rounded(by int64) {
	tg.Rounding = by
	tg.High += by
	for i := range tg.Highs {
		tg.Highs[i] += by
	}
}

// placement is where a replay's frees are: spread over the spans where
// the objects died (the baseline), or every object's at the latest or
// the earliest the trace allows (a bound; see traces.Trace.OpenPlaced).
type placement int

const (
	spread placement = iota
	late
	early
)

// bound sets the target's savings from its replays: the late one's
// against the Go heap alone with its frees placed late too, the early
// one's against it placed early, so that each saving is the move's,
// not the placement's.
func (tg *Target) bound(baseLate, baseEarly Measured) {
	if err := cmp.Or(tg.Late.Error, tg.Early.Error, baseLate.Error, baseEarly.Error); err != "" {
		tg.Error = err
		return
	}
	lateSaving, _, _, lates := pairwise(baseLate, tg.Late)
	earlySaving, _, _, _ := pairwise(baseEarly, tg.Early)
	tg.Low, tg.High = min(lateSaving, earlySaving), max(lateSaving, earlySaving)
	// At each GOGC the lesser of the two, the lower bound there, and the
	// greater.
	tg.Lows, tg.Highs, tg.Saved = nil, nil, 0
	for i := range lates {
		l, e := baseLate.Peaks[i]-tg.Late.Peaks[i], baseEarly.Peaks[i]-tg.Early.Peaks[i]
		tg.Lows, tg.Highs = append(tg.Lows, min(l, e)), append(tg.Highs, max(l, e))
		if min(l, e) > 0 {
			tg.Saved++
		}
	}
	if baseLate.PeakRSS > 0 {
		tg.LowPercent = 100 * float64(tg.Low) / float64(baseLate.PeakRSS)
	}
}

// overlaps reports whether two targets' savings overlap: the least to
// the most each saved at any GOGC, freed late or early.
func (tg Target) overlaps(o Target) bool {
	if len(tg.Lows) == 0 || len(o.Lows) == 0 {
		return false
	}
	return slices.Min(tg.Lows) <= slices.Max(o.Highs) && slices.Min(o.Lows) <= slices.Max(tg.Highs)
}

// choose puts the target printed first (TargetRule): among the moves
// that pass the rule at n GOGCs, or all if none does, the one of the
// highest lower bound, unless a simpler one's savings overlap it.
func (t *TypeTrial) choose(n int) {
	passing := false
	for _, tg := range t.Targets {
		passing = passing || t.movePasses(tg, n)
	}
	eligible := func(tg Target) bool { return tg.Error == "" && (!passing || t.movePasses(tg, n)) }
	best := -1
	for i, tg := range t.Targets {
		if eligible(tg) && (best < 0 || tg.Low > t.Targets[best].Low) {
			best = i
		}
	}
	if best < 0 {
		t.Error = "every move failed: " + t.Targets[0].Error
		return
	}
	for i, tg := range t.Targets {
		b := t.Targets[best]
		if i != best && eligible(tg) && tg.overlaps(b) && t.simpler(tg.Move, b.Move) {
			best = i
		}
	}
	t.Targets[0], t.Targets[best] = t.Targets[best], t.Targets[0]
}

// MaxPoolClasses is how many size classes a slice type may come in for
// pools (one per class) to be simpler code than one heap.
const MaxPoolClasses = 4

// simpler reports whether move a is simpler code than b for t: a heap for
// a type of more than MaxPoolClasses sizes, pools otherwise.
func (t TypeTrial) simpler(a, b Move) bool {
	if len(t.Sizes) > MaxPoolClasses {
		return a.Into == replay.IntoHeap && b.Into != replay.IntoHeap
	}
	return a.Into == replay.IntoPools && b.Into != replay.IntoPools
}

// passes reports whether the chosen move of a trial measured at n GOGCs
// is suggested (movePasses).
func (t TypeTrial) passes(n int) bool {
	tg := t.Chosen()
	return tg != nil && t.movePasses(*tg, n)
}

// movePasses reports whether a move of the trial's type measured at n
// GOGCs passes the rule: its lower bound above zero at Quorum of them,
// at least MinTypeSaving in the median, and no more than NoiseBound.
func (t TypeTrial) movePasses(tg Target, n int) bool {
	return tg.Error == "" && tg.Saved >= Quorum(n) && tg.Low >= MinTypeSaving && tg.Low <= t.NoiseBound
}

// mayPass reports whether the chosen move of a trial measured at n
// GOGCs would pass the rule on its upper bound (every object freed as
// early as the trace allows): above zero at Quorum of them, at least
// MinTypeSaving in the median, and no more than NoiseBound; and whether
// that upper bound is above spread, how far the Go heap's own peak moves
// from one GOGC to another (less is placement noise).
func (t TypeTrial) mayPass(n int, spread int64) bool {
	tg := t.Chosen()
	if tg == nil || tg.Error != "" {
		return false
	}
	saved := 0
	for _, h := range tg.Highs {
		if h > 0 {
			saved++
		}
	}
	return saved >= Quorum(n) && tg.High >= max(MinTypeSaving, spread) && tg.High <= t.NoiseBound
}

// noise reports whether the chosen move's lower bound is above what the
// moved bytes can save: where the re-paced collections fell.
func (t TypeTrial) noise() bool {
	tg := t.Chosen()
	return tg != nil && tg.Low > t.NoiseBound
}

// low is the chosen move's lower bound, for the order of Tried.
func (t TypeTrial) low() int64 {
	if tg := t.Chosen(); tg != nil {
		return tg.Low
	}
	return math.MinInt64
}

// assumes says what the figures assume.
func assumes(paced bool, gogcs []int) []string {
	if !paced {
		return []string{
			"objects die where the trace frees them: at the sweep after the collection that found them unreachable (the trace records no collections), not when the program dropped them; in carve memory they are held as long as the Go heap held them, and a program that frees them itself frees them sooner",
			fmt.Sprintf("the Go heap runs in its child with no memory limit, a full collection each time its objects reach live × (1 + GOGC/100): a concurrent collector's overshoot is left out; where the collections fall moves a peak, so every replay is made at GOGC %s, each figure is the median, and a saving is counted at the same GOGC", joinInts(gogcs)),
			classesAssumed,
			ruleAssumed,
		}
	}
	return []string{
		"objects die at the end of the collection's mark that proved them dead (the trace's frees moved there from the sweep); the baseline's objects die spread between the later of their birth and the start of the mark before, and the start of the mark that did not find them (its collections fall between the program's, where the trace proves no object dead); a move's saving is a range, each end taken against the Go heap alone with its frees placed alike: its low end frees every object of the what-if, moved or not, at the start of the mark that did not find it, the latest it can have died (the mark finds what was reachable when it started), its high end as early as the trace allows (the later of its birth and the start of the mark before; for an object the trace never frees, of its birth and the start of the last mark): a program that frees a buffer or value when it drops or replaces it comes between the two, and with a large type gone the what-if collects far more often than the program did, so that where the objects left on the Go heap died moves its peak too",
		fmt.Sprintf("the Go heap runs in its child with no memory limit, a full collection each time its objects reach the goal set at each of the program's collections: the program's marked heap less the moved objects its mark found, times how far the program's heap grew over its marked heap before its next mark ended (so the black allocation of its concurrent marks is the program's, less the moved objects'); a heap with fewer objects may mark faster and so allocate less black: the late bound keeps the program's marks as long as they were (a mark whose cost is all in the pointer bytes it scans), the early one shortens them by the moved objects' share of the objects they visited (a mark whose cost is all per object); the baseline is paced by the same model, whose own error (the paced baseline against the heap collected where the program collected) is printed; the repeats scale the ratio's excess over 1 by GOGC/100 at GOGC %s, which moves each collection by a fraction of a cycle, each figure is the median, a saving is counted at the same GOGC", joinInts(gogcs)),
		classesAssumed,
		ruleAssumed,
		"every byte of every object is written when it is allocated (the replays touch their memory, as a program that fills its buffers does): a program that leaves most of a buffer unwritten holds fewer pages on the Go heap, and may save less",
	}
}

// What every advice assumes about sizes and the GOGC rule.
const (
	classesAssumed = "a type's objects keep the sizes the trace gives them, their size classes, in every target: pools of those sizes hold what the program's would; pool.NewOf[T] holds each at the type's own size; a heap given the program's n bytes would hold less than the class (said below the table, where a type comes in many sizes), and a heap's upper bound counts the most it can hold less"
	ruleAssumed    = "the rule \"a live byte costs 1 + GOGC/100 bytes on the Go heap and one in a pool\" is shown beside what was measured, not instead of it"
)

// maxSizes bounds the distinct sizes labelSizes counts: a size first
// seen after that many is left out (a []byte's objects come in Go's size
// classes, about seventy, and page multiples above them).
const maxSizes = 1024

// labelSizes reads tr and returns, for each of names (a type's name, or
// a type's at a site: TypeTrial.moved, as trace.MovedBy reads them), the
// sizes its objects come in, the most bytes allocated first (then the
// smaller size).
func labelSizes(tr traces.Trace, names []string) (map[string][]SizeCount, error) {
	src, closer, err := tr.Open()
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	labels := trace.LabelsOf(src)
	of := map[uint32]string{} // label number -> its name if named, as found
	counts := map[string]map[uint64]int64{}
	batch := make([]trace.Event, 1024)
	for {
		n, err := src.Read(batch)
		for _, e := range batch[:n] {
			if e.Label == 0 || (e.Op != trace.Alloc && e.Op != trace.Calloc && e.Op != trace.Memalign) {
				continue
			}
			name, seen := of[e.Label]
			if !seen {
				lab, _ := labels.Label(e.Label)
				i := slices.IndexFunc(names, func(n string) bool { return trace.MovedBy(lab, []string{n}) })
				if name = ""; i >= 0 {
					name = names[i]
				}
				of[e.Label] = name
			}
			if name == "" {
				continue
			}
			c := counts[name]
			if c == nil {
				c = map[uint64]int64{}
				counts[name] = c
			}
			if _, ok := c[e.Size]; ok || len(c) < maxSizes {
				c[e.Size]++
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	out := map[string][]SizeCount{}
	for name, c := range counts {
		var sizes []SizeCount
		for size, n := range c {
			sizes = append(sizes, SizeCount{Size: int(size), Requests: n, Bytes: int64(size) * n})
		}
		slices.SortFunc(sizes, func(a, b SizeCount) int {
			return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), cmp.Compare(a.Size, b.Size))
		})
		out[name] = sizes
	}
	return out, nil
}

// Quorum is how many of n pairs must save for a type to be suggested:
// four in five, rounded up (all of up to three, four of five, eight of
// ten).
func Quorum(n int) int { return (4*n + 4) / 5 }

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

// Movable reports whether a program can move the objects of a type as
// a trace names it to carve memory: not the runtime's own (package
// runtime, internal packages), the testing package's (a go test run's
// harness) nor the compiler's (a map's groups and tables, a closure's
// context), which no code of the program allocates by name.
func Movable(name string) bool {
	t := strings.TrimLeft(name, "*[]0123456789")
	for _, p := range []string{"runtime.", "internal/", "testing.", "map.", "noalg.", "struct { F uintptr"} {
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

// Rule is the rule a move must pass to be suggested, as the help and the
// advice state it, from the constants the advisor applies.
func Rule(repeats int) string {
	gogcs := "every GOGC"
	if q := Quorum(repeats); q < repeats {
		gogcs = fmt.Sprintf("%d or more of the %d GOGCs", q, repeats)
	}
	return fmt.Sprintf("its lower bound (the lesser of the savings with the objects freed late and early) above zero at %s, at least %s in the median, "+
		"and no more than what the moved bytes cost on the Go heap, × (1 + GOGC/100), plus their share of its RSS above peak live (more is placement noise)",
		gogcs, size.Format(MinTypeSaving))
}

// TargetRule is how the advisor picks the move it prints for a type, as
// the help and the advice state it.
var TargetRule = fmt.Sprintf("among the moves that pass the rule below (all, if none does), the one with the highest lower bound, unless another's savings (the least to the most at any GOGC) overlap its own and its code is simpler: "+
	"one heap for a slice of more than %d sizes, pools otherwise", MaxPoolClasses)

// WriteText writes the type advice for a reader, laid out to width (see
// textWriter; 0: every line whole, every column).
func (a *TypeAdvice) WriteText(w io.Writer, width int) error {
	ew := &textWriter{w: w, width: width}
	ew.para("", "  ", fmt.Sprintf("carve advise: %s, a Go program's types moved off the Go heap (%s)", a.Trace, a.Base))
	ew.para("", "  ", fmt.Sprintf("every replay of the whole trace is made at GOGC %s, in a child process each: %d replays; figures are medians", joinInts(a.GOGCs), a.Replays))
	if a.Baseline.Error != "" {
		ew.printf("\n")
		ew.para("", "  ", "the Go heap failed on the trace: "+a.Baseline.Error)
		return ew.err
	}
	ew.para("", "  ", fmt.Sprintf("the Go heap: peak RSS %s (%s to %s), peak live %s (%.3f)", size.Format(a.Baseline.PeakRSS), size.Format(a.Baseline.Low), size.Format(a.Baseline.High),
		size.Format(a.Baseline.PeakLive), fpOverLive(a.Baseline.PeakRSS, a.Baseline.PeakLive)))
	if p := a.Program; p != nil && p.Error == "" {
		ew.para("  ", "    ", fmt.Sprintf("paced by the model; collected where the program collected: peak RSS %s, so the model's error is %s (%+.1f%%)",
			size.Format(p.PeakRSS), signed(a.ModelError), 100*float64(a.ModelError)/float64(max(p.PeakRSS, 1))))
	}
	ew.para("", "  ", fmt.Sprintf("types tried: pointer-free, holding at least %s at the trace's peak (--min-type %s, of the peak marked heap of %s), the %s largest",
		size.Format(a.FloorBytes), a.Floor, size.Format(a.PeakMarked), text.Count(int64(a.Candidates), "type")))
	ew.printf("\n")
	bounds := "saving"
	if a.Paced {
		bounds = "saving: freed late to early"
	}
	if len(a.Tried) > 0 {
		t := a.triedTable(bounds, false)
		if width > 0 && t.kept("  ", width) < len(t.heads) && slices.ContainsFunc(a.Tried, func(t TypeTrial) bool { return t.Site != "" }) {
			t = a.triedTable(bounds, true) // the sites on lines of their own
		}
		t.write(ew, "  ")
		kept := t.heads[:t.kept("  ", width)]
		for _, tt := range a.Tried {
			if tt.Chosen() == nil {
				ew.para("  ", "    ", fmt.Sprintf("%s: failed: %s", tt.name(), tt.Error))
			}
		}
		if slices.Contains(kept, headAtPeak) {
			ew.para("  ", "    ", "at the trace's peak: the type's bytes where the trace's live bytes peak, its frees at the marks' ends (the Go heap's peak live above is its replay's, frees spread where the objects died)")
		}
		if a.Paced {
			above := ""
			if slices.Contains(kept, headAbove) {
				above = "; above 0 at: the GOGCs where the lesser of the two saved"
			}
			ew.para("  ", "    ", "saving: against the Go heap at the same GOGC, the median, with every object of the what-if freed at the start of the mark that did not find it, the latest it can have died (late), and as early as the trace allows (early), each against the Go heap alone with its frees placed alike"+above)
		}
		if slices.Contains(kept, headAtMost) {
			ew.para("  ", "    ", "at most: what the moved bytes cost on the Go heap, × (1 + GOGC/100), and their share of its RSS above peak live, never more than its peak RSS; a saving above it is placement noise (where the re-paced collections fell), never suggested")
		}
		ew.para("  ", "    ", "into: "+TargetRule)
		ew.printf("\nevery move measured (%s):\n", bounds)
		for _, t := range a.Tried {
			a.writeTargets(ew, t)
		}
	}
	if len(a.Left) > 0 {
		ew.printf("\nnot tried:\n")
		for _, l := range a.Left {
			types := text.Count(int64(l.Types), "type") + ", "
			if l.Why == LeftUntyped {
				types = ""
			}
			ew.para("  ", "    ", fmt.Sprintf("%s: %s%s in %s at the peak", l.Why, types, size.Format(int64(l.Bytes)), text.Count(l.Objects, "object")))
		}
		if a.Untyped {
			ew.para("  ", "    ", fmt.Sprintf("the objects of no type hold more than %.0f%% of the trace's peak: the figures cover the typed objects only", 100*UntypedShare))
		}
	}
	if len(a.Refused) > 0 {
		a.writeRefused(ew)
	}
	ew.printf("\nthe figures assume:\n")
	for _, s := range a.Assumes {
		ew.para("  - ", "    ", s)
	}
	ew.printf("\n")
	ew.para("", "  ", "a move is suggested with "+Rule(len(a.GOGCs)))
	if len(a.Unproven) > 0 {
		ew.printf("\n")
		ew.para("", "  ", fmt.Sprintf("not suggested, unproven: their upper bound passes the rule, and is above how far the Go heap's own peak moves from GOGC to GOGC (%s), but not their lower bound: the trace cannot tell when in a collection cycle the program dropped these objects (it learns of a death at the next mark); freed as soon as they are dropped, they may save up to the upper bound, and freed late nothing:", size.Format(a.Baseline.High-a.Baseline.Low)))
		for _, t := range a.Unproven {
			tg := t.Chosen()
			ew.para("  ", "    ", fmt.Sprintf("%s into %s: %s to %s of peak RSS (%.1f%% to %.1f%%); measure the program after the change (carve record, VmHWM)", t.name(), tg.Move.Kind(), signed(tg.Low), signed(tg.High),
				tg.LowPercent, 100*float64(tg.High)/float64(max(a.Baseline.PeakRSS, 1))))
		}
		ew.printf("\n")
		ew.code("\t", a.GoUnproven)
	}
	if len(a.Suggested) == 0 {
		ew.printf("\nno type suggested\n")
		return ew.err
	}
	ew.printf("\nsuggested:\n")
	for _, t := range a.Suggested {
		tg := t.Chosen()
		s := fmt.Sprintf("%s into %s: peak RSS %s below the Go heap's (%.1f%%)", t.name(), tg.Move.Kind(), size.Format(tg.Low), tg.LowPercent)
		if a.Paced {
			s += fmt.Sprintf(", up to %s with every object freed as early as the trace allows", size.Format(tg.High))
		}
		ew.para("  ", "    ", s+fmt.Sprintf("; the GOGC rule predicted %s", size.Format(t.Rule)))
	}
	ew.printf("\n")
	ew.code("\t", a.Go)
	return ew.err
}

// The heads of the types' table that a note below it explains, printed
// with the column.
const (
	headAbove  = "above 0 at"
	headAtMost = "at most"
	headAtPeak = "at the trace's peak"
)

// triedTable is the table of the types tried, its columns the headline
// first: the type, the move printed and its saving; sited puts each
// trial's site on a line of its own below its row.
func (a *TypeAdvice) triedTable(bounds string, sited bool) table {
	t := table{heads: []string{"type", "into", bounds, "", headAbove, headAtMost, headAtPeak, "objects", "peak RSS"},
		left: []bool{true, true, false, true, false, false, false, false, false}, headline: 4}
	for _, tt := range a.Tried {
		name, under := tt.name(), ""
		if sited && tt.Site != "" {
			name, under = tt.Type, "at "+tt.Site
		}
		tg := tt.Chosen()
		if tg == nil {
			t.add(under, name, "", "failed (below)", "", "", "", size.Format(int64(tt.Bytes)), strconv.FormatInt(tt.Objects, 10), "")
			continue
		}
		saving := signed(tg.Low)
		if a.Paced {
			saving += " to " + signed(tg.High)
		}
		note := fmt.Sprintf("(%.1f%%)", tg.LowPercent)
		switch {
		case tt.Suggested:
			note += " suggested"
		case tt.noise():
			note += " noise"
		}
		t.add(under, name, tg.Move.Kind(), saving, note, fmt.Sprintf("%d of %d", tg.Saved, len(a.GOGCs)), size.Format(tt.NoiseBound),
			size.Format(int64(tt.Bytes)), strconv.FormatInt(tt.Objects, 10), size.Format(tg.Late.PeakRSS))
	}
	return t
}

// writeRefused lists the types that hold pointers: with a width, a short
// line each under the reason said once; with none, each with its reason.
func (a *TypeAdvice) writeRefused(ew *textWriter) {
	ew.printf("\n")
	if ew.width <= 0 {
		ew.printf("types that hold pointers stay on the Go heap:\n")
		for _, r := range a.Refused {
			ew.printf("  %s (%s at the peak): %s\n", r.Type, size.Format(int64(r.Bytes)), r.Why)
		}
		return
	}
	ew.para("", "  ", "types that hold pointers stay on the Go heap: "+pointersWhy+":")
	for _, r := range a.Refused {
		why := r.Why
		if r.PtrBytes > 0 {
			why = fmt.Sprintf("%d of %d bytes may hold pointers", r.PtrBytes, r.Size)
		}
		ew.para("  ", "    ", fmt.Sprintf("%s (%s at the peak): %s", r.Type, size.Format(int64(r.Bytes)), why))
	}
}

// writeTargets says, for a type, its saving in each move measured:
// "[]byte: heap 48.60 MiB to 87.67 MiB, pools (68 sizes) ...".
func (a *TypeAdvice) writeTargets(ew *textWriter, t TypeTrial) {
	var parts []string
	for _, tg := range t.Targets {
		p := tg.Move.Kind()
		if len(tg.Move.Sizes) > 0 {
			p += fmt.Sprintf(" (%s)", text.Count(int64(len(tg.Move.Sizes)), "size"))
		}
		switch {
		case tg.Error != "":
			p += " failed: " + tg.Error
		case a.Paced:
			p += " " + signed(tg.Low) + " to " + signed(tg.High)
		default:
			p += " " + signed(tg.Low)
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return
	}
	ew.list("  ", "    ", t.name()+": ", parts)
	if r := t.Rounding; r != nil {
		ew.para("    ", "    ", fmt.Sprintf("its objects are replayed at the sizes the trace gives them, Go's size classes, where the program asked for n bytes: "+
			"the classes are %.1f%% above the requests if these spread evenly within each class (%.1f%% at the most), "+
			"about %s of its %s at the peak, by which a heap's saving is under-stated: a heap's upper bound counts the most, %s",
			r.EvenPercent, r.MostPercent, size.Format(r.AtPeak), size.Format(int64(t.Bytes)), size.Format(int64(r.MostPercent/100*float64(t.Bytes)))))
	}
}

// Typed reports whether the trace's objects carry Go types (labels of a
// name: a Go program's trace), from its first events: the trace
// AdviseTypes is for. A C program's call-stack sites are labels of no
// name: such a trace is advised by size, as one of no labels.
func Typed(t traces.Trace) bool {
	src, closer, err := t.Open()
	if err != nil {
		return false
	}
	defer closer.Close()
	labelled, _ := src.(interface{ Labels() *trace.Labels })
	buf := make([]trace.Event, 4096)
	for range 16 {
		n, err := src.Read(buf)
		for _, e := range buf[:n] {
			if e.Label == 0 || labelled == nil {
				continue
			}
			if l, ok := labelled.Labels().Label(e.Label); ok && l.Name != "" {
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
