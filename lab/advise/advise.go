// Package advise finds the dedicated pools that would lower an
// allocator's peak footprint on a trace. It does not estimate: it replays
// the trace through the base allocator behind each candidate pool and
// keeps the one that measured best, greedily, one pool per round.
//
//	candidates  the request sizes the trace asks for most often and the
//	            ones that take the most bytes (one pass over the trace);
//	            a pool serves one size, so a candidate is one exact size
//	baseline    one replay of the base allocator alone: its peak footprint
//	round k     one replay per remaining candidate, behind the pools chosen
//	            so far and that candidate (replay.WithPool, stacked),
//	            Config.Jobs of them at once; the candidate whose replay has
//	            the lowest peak footprint, pools included, is chosen if it
//	            saves at least the threshold
//
// The replays skip the correctness checks (replay.Options.NoCheck): the
// advisor measures, the lab checks. A meter around each layer of the
// stack (see stack) tells each pool's own footprint and live bytes apart
// from the whole's, for its cost: its slab waste, Footprint - Live, at the
// peak. A trace of up to traces.MaxHeld events is read once, by the
// candidates' pass, and replayed from memory.
//
// carve advise is this package's command line; see the lab's overview
// (package lab) for the measures.
package advise

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	carve "github.com/carvelab/carve"
	"github.com/carvelab/carve/internal/size"
	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/traces"
	"github.com/carvelab/carve/pool"
)

// Schema names the version of the JSON of an Advice.
const Schema = "carve.advise/v1"

// DefaultBase is the allocator the pools are put in front of unless
// Config.Base says otherwise: best fit, because, with its exact-size bins
// for small blocks and its size-ordered tree for the rest, it is the carve
// heap closest to what glibc's malloc does, which cannot be replayed in
// this process.
const DefaultBase = "best-fit"

// The default threshold: a pool must save 1% of the baseline's peak
// footprint, and at least 64 KiB (one slab of a pool).
const (
	defaultMinPercent = 1
	defaultMinBytes   = 64 << 10
)

// Config is what to advise on, and how.
type Config struct {
	Trace traces.Trace
	// Base is the allocator the pools go in front of: one of
	// replay.Names() (DefaultBase when empty).
	Base string
	// Min is the least saving a pool must bring (the zero Threshold: 1%
	// of the baseline's peak, at least 64 KiB).
	Min Threshold
	// MaxPools is the most pools suggested (4 when 0); Candidates the
	// sizes taken from each ranking (8 when 0); Jobs the replays run at
	// once (1 when 0; the Go heap's replays always run one at a time, as
	// replays side by side would share, and measure, one Go heap).
	MaxPools, Candidates, Jobs int
	// MaxRequest is the budget of one request (replay.Options.MaxRequest;
	// 0: replay.DefaultMaxRequest).
	MaxRequest int64
	// Progress, when not nil, has the events replayed added to it, for a
	// display in another goroutine.
	Progress *atomic.Int64
}

// advisor is one run of Advise.
type advisor struct {
	Config
	// held is the trace's events, read by the candidates' pass, when
	// there are at most traces.MaxHeld: the replays read them from memory
	// rather than decode the trace again. nil: Trace.Open each time.
	held []trace.Event
}

// ErrBase is wrapped by Advise's error for a base it cannot replay.
var ErrBase = errors.New("advise: unknown base allocator")

// Advise measures the baseline, then chooses pools round by round, and
// returns what it measured. Its error wraps replay.ErrSource for a trace
// that cannot be read, replay.ErrBudget for one the machine cannot hold,
// and ErrBase for a base it does not know. The replays skip the checks
// and count trace errors without stopping, so no replay fails a check. An
// allocator that fails (exhausted, say) rules out its candidate only; a
// base that fails alone makes an Advice of no pool that says why.
func Advise(c Config) (*Advice, error) {
	if c.Base == "" {
		c.Base = DefaultBase
	}
	if c.MaxPools <= 0 {
		c.MaxPools = 4
	}
	if c.Candidates <= 0 {
		c.Candidates = 8
	}
	if c.Jobs <= 0 || c.Base == "go" {
		c.Jobs = 1
	}
	a, err := replay.New(c.Base)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBase, err)
	}
	a.Close()
	c.Trace = c.Trace.Spooled() // decoded once, however many replays
	ad := &advisor{Config: c}
	cands, held, err := poolCandidates(c.Trace, c.Candidates)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", replay.ErrSource, c.Trace.Label, err)
	}
	ad.held = held
	return ad.advise(cands)
}

// Threshold is the least saving a pool must bring, in bytes or as a
// percentage of the baseline's peak footprint. The zero value is the
// default: 1%, at least 64 KiB. It is a flag.Value (carve advise --min).
type Threshold struct {
	text    string
	bytes   int64
	percent float64
}

func (t *Threshold) String() string { return t.text }

// Set reads a threshold: bytes (65536, 64KiB, 1MiB) or a percentage of
// the baseline's peak (2%).
func (t *Threshold) Set(s string) error {
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || v < 0 || v > 100 || math.IsNaN(v) {
			return fmt.Errorf("want a percentage from 0%% to 100%%, got %q", s)
		}
		*t = Threshold{text: s, percent: v}
		return nil
	}
	v, err := size.Parse(s)
	if err != nil {
		return fmt.Errorf("want bytes (65536, 64KiB, 1MiB) or a percentage (2%%), got %q", s)
	}
	*t = Threshold{text: s, bytes: v}
	return nil
}

// of returns the threshold for a baseline peak footprint of peak bytes.
func (t Threshold) of(peak int64) int64 {
	switch {
	case t.text == "":
		return max(peak*defaultMinPercent/100, defaultMinBytes)
	case t.percent > 0:
		return int64(math.Ceil(float64(peak) * t.percent / 100))
	}
	return t.bytes
}

// describe says how the threshold was set, for the report.
func (t Threshold) describe() string {
	switch {
	case t.text == "":
		return fmt.Sprintf("%d%% of the baseline's peak, at least %s", defaultMinPercent, size.Format(defaultMinBytes))
	case t.percent > 0:
		return t.text + " of the baseline's peak"
	}
	return "--min " + t.text
}

// maxPoolChunk is the largest chunk pool.New takes.
const maxPoolChunk = 1 << 30

// SizeCount is how often a trace asks for one size a pool could serve.
type SizeCount struct {
	Size     int   `json:"size"`
	Requests int64 `json:"requests"`
	Bytes    int64 `json:"bytes"` // Size × Requests
	// Sites are, in a trace whose labels carry allocation sites (a C
	// program's call stacks, a Go test's heap profile), the sites that
	// ask for the size most, at most MaxSites of them, most first: where
	// in the program a pool of the size takes its requests from.
	Sites []SiteCount `json:"sites,omitempty"`
}

// SiteCount is how many of a size's requests one site made (the
// allocations labelled with the site, and the reallocs that name it).
type SiteCount struct {
	Site     string `json:"site"`
	Requests int64  `json:"requests"`
}

// MaxSites is the most sites a SizeCount lists.
const MaxSites = 3

// poolCandidates reads the trace once and returns the sizes to replay a
// pool for: the n most requested and the n taking the most bytes, most
// requested first (the order that breaks ties between equal savings).
// A request counts if replay.WithPool would send it to a pool of its
// size: an allocation with an alignment of at most 8, or a realloc's new
// size; a pool's chunk holds at least pool.LinkSize bytes. It returns
// the trace's events too, if there are at most traces.MaxHeld, or nil.
func poolCandidates(s traces.Trace, n int) ([]SizeCount, []trace.Event, error) {
	src, closer, err := s.Open()
	if err != nil {
		return nil, nil, err
	}
	defer closer.Close()
	counts := map[uint64]int64{}
	labels := trace.LabelsOf(src)
	siteOf := map[uint32]string{}           // label -> its site, "" for none, as found
	bySite := map[uint64]map[string]int64{} // size -> site -> requests
	held := []trace.Event{}
	buf := make([]trace.Event, 4096)
	for {
		k, err := src.Read(buf)
		if held != nil && len(held)+k <= traces.MaxHeld {
			held = append(held, buf[:k]...)
		} else {
			held = nil
		}
		for _, e := range buf[:k] {
			switch {
			case e.Op == trace.Free, e.Op != trace.Realloc && e.Op != trace.Calloc && e.Align > 8:
				continue
			}
			if e.Size >= uint64(pool.LinkSize) && e.Size <= maxPoolChunk {
				counts[e.Size]++
				if e.Label == 0 {
					continue
				}
				site, seen := siteOf[e.Label]
				if !seen {
					l, _ := labels.Label(e.Label)
					site, _ = l.Attr(trace.AttrSite)
					siteOf[e.Label] = site
				}
				if site != "" {
					if bySite[e.Size] == nil {
						bySite[e.Size] = map[string]int64{}
					}
					bySite[e.Size][site]++
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
	}
	all := make([]SizeCount, 0, len(counts))
	for size, reqs := range counts {
		all = append(all, SizeCount{Size: int(size), Requests: reqs, Bytes: int64(size) * reqs})
	}
	// The sizes first by bytes, then by requests: the order returned.
	picked := map[int]bool{}
	for _, key := range []func(SizeCount) int64{
		func(c SizeCount) int64 { return c.Bytes },
		func(c SizeCount) int64 { return c.Requests },
	} {
		slices.SortFunc(all, func(a, b SizeCount) int {
			return cmp.Or(cmp.Compare(key(b), key(a)), cmp.Compare(a.Size, b.Size))
		})
		for _, c := range all[:min(n, len(all))] {
			picked[c.Size] = true
		}
	}
	all = slices.DeleteFunc(all, func(c SizeCount) bool { return !picked[c.Size] })
	for i := range all {
		for site, n := range bySite[uint64(all[i].Size)] {
			all[i].Sites = append(all[i].Sites, SiteCount{site, n})
		}
		slices.SortFunc(all[i].Sites, func(a, b SiteCount) int {
			return cmp.Or(cmp.Compare(b.Requests, a.Requests), strings.Compare(a.Site, b.Site))
		})
		all[i].Sites = all[i].Sites[:min(len(all[i].Sites), MaxSites)]
	}
	return all, held, nil
}

// Advice is what the advisor measured and suggests. WriteText prints it
// for a reader; as JSON its field names are part of the versioned schema
// (Schema): fields are added, never renamed.
type Advice struct {
	Schema    string `json:"schema"`
	Trace     string `json:"trace"`
	Base      string `json:"base"`
	Checked   bool   `json:"checked"` // false: replayed without the correctness checks
	Threshold int64  `json:"threshold"`
	// ThresholdRule says where Threshold comes from: the default rule or --min.
	ThresholdRule string `json:"threshold_rule"`
	MaxPools      int    `json:"max_pools"`
	Replays       int    `json:"replays"`
	Note          string `json:"note,omitempty"` // a caveat about the base's measurements
	// BaseFailed reports a base that failed on the trace by itself
	// (exhausted, say): Stop says how, and there is no baseline.
	BaseFailed bool `json:"base_failed,omitempty"`

	Candidates []SizeCount `json:"candidates"`
	Baseline   struct {
		PeakFootprint int64 `json:"peak_footprint"`
		PeakLive      int64 `json:"peak_live"`
		TraceErrors   int64 `json:"trace_errors"`
	} `json:"baseline"`
	// Rounds are every replay of each round, best saving first.
	Rounds [][]Tried `json:"rounds"`
	// Pools are the suggestions, in the order they were chosen.
	Pools              []Pool `json:"pools"`
	FinalPeakFootprint int64  `json:"final_peak_footprint"`
	Stop               string `json:"stop"` // why no further pool was chosen
	Go                 string `json:"go"`   // the code that makes the pools
}

// Tried is one candidate's replay in one round.
type Tried struct {
	Size          int    `json:"size"`
	PeakFootprint int64  `json:"peak_footprint"`
	Saving        int64  `json:"saving"` // the round's starting peak less PeakFootprint; negative: it cost
	Error         string `json:"error,omitempty"`
}

// Pool is one suggested pool. Saving and PeakFootprint are measured in
// the round that chose it (behind the pools chosen before it); the rest
// is read from the final replay, with every suggested pool, at its peak
// footprint.
type Pool struct {
	Size          int     `json:"size"`
	Saving        int64   `json:"saving"`
	SavingPercent float64 `json:"saving_percent"` // of the baseline's peak footprint
	PeakFootprint int64   `json:"peak_footprint"` // the whole heap's, pools included, once this pool was added
	PoolAtPeak
	Limit int64 `json:"limit"` // the Limit of the Go snippet: twice MaxFootprint, rounded up to a power of two
}

// PoolAtPeak is one pool of a replay, measured at the replay's peak
// footprint: of the events at the peak, the one with the most live
// memory, the first of them (the heap at its fullest: the first event at
// the peak may come before the program refilled memory it had freed, and
// show the pool nearly empty).
type PoolAtPeak struct {
	Requests     int64 `json:"requests"`          // requests of its size, over the whole trace
	Footprint    int64 `json:"footprint_at_peak"` // its own footprint
	Live         int64 `json:"live_at_peak"`      // the bytes of the chunks it had handed out
	Waste        int64 `json:"waste_at_peak"`     // Footprint - Live: its slab waste
	MaxFootprint int64 `json:"max_footprint"`     // its own largest footprint over the trace
}

// trial is one replay of the base allocator behind pools of sizes.
type trial struct {
	sizes []int
	res   replay.Result
	pools []PoolAtPeak // in the order of sizes
	err   error
}

// advise measures the baseline, then chooses pools round by round.
func (c *advisor) advise(cands []SizeCount) (*Advice, error) {
	adv := &Advice{Schema: Schema, Trace: c.Trace.Label, Base: c.Base, MaxPools: c.MaxPools, Candidates: cands}
	if c.Base == "go" {
		adv.Note = "the Go heap's footprint is read at samples only (every 4096 events), after the garbage collector has run or not, and includes the replayer's own bookkeeping: its savings are rough"
	}
	if adv.Candidates == nil {
		adv.Candidates = []SizeCount{}
	}
	cur := c.replay(nil)
	adv.Replays++
	if cur.err != nil {
		if err := c.fatal(cur); err != nil {
			return nil, err
		}
		// The base itself failed (exhausted, say): a measurement, as a
		// failed row of carve replay is, with nothing to put pools in
		// front of.
		adv.Stop = fmt.Sprintf("%s failed on the trace, so no pool can be measured in front of it: %v", c.Base, cur.err)
		adv.BaseFailed = true
		adv.Pools, adv.Rounds = []Pool{}, [][]Tried{}
		return adv, nil
	}
	adv.Baseline.PeakFootprint, adv.Baseline.PeakLive, adv.Baseline.TraceErrors = cur.res.PeakFootprint, cur.res.PeakLive, cur.res.TraceErrors
	adv.Threshold, adv.ThresholdRule = c.Min.of(cur.res.PeakFootprint), c.Min.describe()

	var left []int
	for _, cd := range cands {
		left = append(left, cd.Size)
	}
	var savings []int64
	for {
		if len(savings) == c.MaxPools {
			adv.Stop = fmt.Sprintf("--max %d pools suggested", c.MaxPools)
			break
		}
		if len(left) == 0 {
			adv.Stop = "no candidate left"
			if len(cands) == 0 {
				adv.Stop = fmt.Sprintf("no size a pool could serve (requests of %d B or more, aligned to 8 or less)", pool.LinkSize)
			}
			break
		}
		round, trials, best, err := c.round(cur, left)
		if err != nil {
			return nil, err
		}
		adv.Replays += len(trials)
		adv.Rounds = append(adv.Rounds, round)
		if best < 0 {
			adv.Stop = "every candidate's replay failed"
			break
		}
		saving := cur.res.PeakFootprint - trials[best].res.PeakFootprint
		if saving <= 0 {
			adv.Stop = fmt.Sprintf("no remaining candidate lowers the peak: the best, %d B, raises it by %s", left[best], size.Format(-saving))
			break
		}
		if saving < adv.Threshold {
			adv.Stop = fmt.Sprintf("the best remaining candidate, %d B, would save %s, below the threshold %s", left[best], size.Format(saving), size.Format(adv.Threshold))
			break
		}
		savings = append(savings, saving)
		cur = trials[best]
		left = slices.Delete(left, best, best+1)
	}

	adv.suggest(cur, savings)
	return adv, nil
}

// suggest fills in the pools of the final trial, cur, which the rounds
// chose in order, saving savings[i] each, and the code that makes them.
func (a *Advice) suggest(cur trial, savings []int64) {
	a.FinalPeakFootprint = cur.res.PeakFootprint
	a.Pools = []Pool{}
	peak := a.Baseline.PeakFootprint
	for i, size := range cur.sizes {
		peak -= savings[i]
		p := Pool{Size: size, Saving: savings[i], PeakFootprint: peak, PoolAtPeak: cur.pools[i]}
		p.SavingPercent = 100 * float64(p.Saving) / float64(a.Baseline.PeakFootprint) // > 0: a pool saved some of it
		p.Limit = poolLimit(p.MaxFootprint)
		a.Pools = append(a.Pools, p)
	}
	a.Go = goSnippet(a.Pools)
}

// round replays the base behind the pools of cur and one more of each
// size of left, and returns what each replay measured, best saving first,
// the trials in the order of left, and the index in left of the best
// (the first of equals; -1 if every replay failed).
func (c *advisor) round(cur trial, left []int) (round []Tried, trials []trial, best int, err error) {
	trials = c.replayAll(cur.sizes, left)
	best = -1
	for i, t := range trials {
		if err := c.fatal(t); err != nil {
			return nil, nil, -1, err
		}
		tr := Tried{Size: left[i], PeakFootprint: t.res.PeakFootprint, Saving: cur.res.PeakFootprint - t.res.PeakFootprint}
		if t.err != nil {
			tr.PeakFootprint, tr.Saving, tr.Error = 0, 0, t.err.Error()
		} else if best < 0 || t.res.PeakFootprint < trials[best].res.PeakFootprint {
			best = i
		}
		round = append(round, tr)
	}
	slices.SortStableFunc(round, func(a, b Tried) int { return cmp.Compare(b.Saving, a.Saving) })
	return round, trials, best, nil
}

// fatal returns the error a trial's failure ends the advice with: an
// unreadable trace or a failed check. An allocator's failure (exhausted,
// say) rules its candidate out only: nil.
func (c *advisor) fatal(t trial) error {
	var v *replay.Violation
	var te *replay.TraceError
	switch {
	case errors.Is(t.err, replay.ErrSource), errors.Is(t.err, replay.ErrBudget):
		return fmt.Errorf("%s: %w", c.Trace.Label, t.err)
	case errors.As(t.err, &v), errors.As(t.err, &te):
		return fmt.Errorf("%s behind pools %v on %s: %w", c.Base, t.sizes, c.Trace.Label, t.err)
	}
	return nil
}

// replayAll replays the base behind the pools of chosen and one more,
// each size of cands in turn, c.Jobs replays at once, and returns the
// trials in the order of cands.
func (c *advisor) replayAll(chosen, cands []int) []trial {
	out := make([]trial, len(cands))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(c.Jobs, len(cands)) {
		wg.Go(func() {
			for i := range next {
				out[i] = c.replay(append(slices.Clone(chosen), cands[i]))
			}
		})
	}
	for i := range cands {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// replay replays the trace (held in memory, or opened afresh) through the
// base allocator behind pools of sizes, without the correctness checks.
func (c *advisor) replay(sizes []int) trial {
	t := trial{sizes: sizes}
	base, err := replay.New(c.Base)
	if err != nil {
		t.err = err
		return t
	}
	st := &stack{layers: []*meter{{a: base}}}
	defer st.Close()
	for _, s := range sizes {
		if err := st.push(s); err != nil {
			t.err = fmt.Errorf("pool of %d B: %w", s, err)
			return t
		}
	}
	var src trace.Source
	if c.held != nil {
		src = trace.Events(c.held)
	} else {
		s, closer, err := c.Trace.Open()
		if err != nil {
			t.err = fmt.Errorf("%w: %w", replay.ErrSource, err)
			return t
		}
		defer closer.Close()
		src = s
	}
	t.res, t.err = replay.Run(src, st, replay.Options{NoCheck: true, MaxRequest: c.MaxRequest, Progress: c.Progress})
	t.pools = st.pools
	for i := range t.pools {
		t.pools[i].Requests = st.layers[i+1].requests
	}
	return t
}

// stack is the base allocator behind pools, with a meter at every layer,
// so that each pool's own figures can be told apart from the whole's:
// layers[0] meters the base allocator, layers[i] the replay.WithPool of
// the i-th pool in front of layers[i-1], and the i-th pool's footprint
// and live bytes are layers[i]'s less layers[i-1]'s. The replayer calls
// the top layer through the stack, which notes the pools at each new peak
// of the footprint.
type stack struct {
	layers   []*meter
	peak     int64
	peakLive int64        // the most live memory at the peak
	pools    []PoolAtPeak // pool i: layers[i+1] less layers[i]
}

// push puts a pool of size bytes in front of the stack.
func (s *stack) push(size int) error {
	p, err := replay.WithPool(size, s.top())
	if err != nil {
		return err
	}
	s.layers = append(s.layers, &meter{a: p, size: size})
	s.pools = append(s.pools, PoolAtPeak{})
	return nil
}

func (s *stack) top() *meter { return s.layers[len(s.layers)-1] }

func (s *stack) Alloc(size, align int) ([]byte, error)      { return s.top().Alloc(size, align) }
func (s *stack) Free(b []byte) error                        { return s.top().Free(b) }
func (s *stack) Realloc(b []byte, size int) ([]byte, error) { return s.top().Realloc(b, size) }
func (s *stack) Contains(b []byte) bool                     { return s.top().Contains(b) }
func (s *stack) Close() error                               { return s.top().Close() }

func (s *stack) Footprint() int64 {
	fp := s.top().Footprint()
	s.note(fp)
	return fp
}

func (s *stack) Stats() carve.Stats {
	st := s.top().Stats()
	s.note(st.Footprint)
	return st
}

// note keeps each pool's largest footprint and, when fp is a new peak of
// the whole, or the peak with more live memory than before, each pool's
// figures there (see PoolAtPeak). Every layer's fp is fresh: the call
// that returned fp went down through all of them.
func (s *stack) note(fp int64) {
	live := s.top().live
	peak := fp > s.peak || fp == s.peak && live > s.peakLive
	if peak {
		s.peak, s.peakLive = fp, live
	}
	for i := range s.pools {
		in, below := s.layers[i+1], s.layers[i]
		p := &s.pools[i]
		own := in.fp - below.fp
		p.MaxFootprint = max(p.MaxFootprint, own)
		if peak {
			p.Footprint, p.Live = own, in.live-below.live
			p.Waste = p.Footprint - p.Live
		}
	}
}

// meter passes every call on to a and keeps what the advisor reads of
// it: the bytes of the blocks handed out through it and not freed, its
// footprint at the last call that reported one, and the requests of size
// bytes it was asked for (counted for the base's meter too, whose size is
// 0, but read only for a pool's).
type meter struct {
	a        replay.Allocator
	size     int
	live     int64
	fp       int64
	requests int64
}

func (m *meter) Alloc(size, align int) ([]byte, error) {
	b, err := m.a.Alloc(size, align)
	if err != nil {
		return nil, err
	}
	m.live += int64(len(b))
	if (replay.Route{Size: m.size}).Takes(size, align, "") { // what replay.WithPool sends to its pool
		m.requests++
	}
	return b, nil
}

func (m *meter) Free(b []byte) error {
	if err := m.a.Free(b); err != nil {
		return err
	}
	m.live -= int64(len(b))
	return nil
}

func (m *meter) Realloc(b []byte, size int) ([]byte, error) {
	n, err := m.a.Realloc(b, size)
	if err != nil {
		return nil, err
	}
	m.live += int64(len(n)) - int64(len(b))
	if size == m.size {
		m.requests++
	}
	return n, nil
}

func (m *meter) Footprint() int64 {
	m.fp = m.a.Footprint()
	return m.fp
}

func (m *meter) Stats() carve.Stats {
	st := m.a.Stats()
	m.fp = st.Footprint
	return st
}

func (m *meter) Close() error { return m.a.Close() }

// Contains asks a, if it can tell; otherwise every block is inside (as
// replay.WithPool does).
func (m *meter) Contains(b []byte) bool {
	c, ok := m.a.(replay.Container)
	return !ok || c.Contains(b)
}

// poolLimit returns the Limit to suggest for a pool whose footprint
// reached fp: twice that, rounded up to a power of two, and at least one
// default slab (64 KiB).
func poolLimit(fp int64) int64 {
	return max(int64(1)<<bits.Len64(uint64(max(2*fp-1, 0))), 64<<10)
}

// shifted writes n as a Go constant, shifted when it is a multiple of
// 1 KiB: 16<<20.
func shifted(n int64) string {
	for _, s := range []int{30, 20, 10} {
		if n%(1<<s) == 0 {
			return fmt.Sprintf("%d<<%d", n>>s, s)
		}
	}
	return strconv.FormatInt(n, 10)
}

// goSnippet writes the code that makes the pools, for the report.
func goSnippet(pools []Pool) string {
	if len(pools) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("// import \"github.com/carvelab/carve/pool\"\n")
	for _, p := range pools {
		v := fmt.Sprintf("p%d", p.Size)
		fmt.Fprintf(&b, "%s, err := pool.New(%d, pool.Limit(%s)) // twice the %s it reached on the trace\n", v, p.Size, shifted(p.Limit), size.Format(p.MaxFootprint))
		fmt.Fprintf(&b, "if err != nil {\n\treturn err\n}\ndefer %s.Close()\n", v)
	}
	b.WriteString("// A request of exactly one of these sizes: b, err := p<size>.Alloc(), and\n")
	b.WriteString("// p<size>.Free(b) when done; every other request to the heap as before.\n")
	return b.String()
}

// WriteText writes the advice for a reader: the candidates, every round's
// savings, the suggested pools and the Go code that makes them, laid out
// to width (see textWriter; 0: every line whole, every column).
func (a *Advice) WriteText(w io.Writer, width int) error {
	ew := &textWriter{w: w, width: width}
	ew.para("", "  ", fmt.Sprintf("carve advise: %s, pools in front of %s", a.Trace, a.Base))
	ew.para("", "  ", fmt.Sprintf("every figure measured by a replay, without the correctness checks (as --nocheck): %d replays in %d rounds", a.Replays, len(a.Rounds)))
	var cs []string
	for _, c := range a.Candidates {
		cs = append(cs, fmt.Sprintf("%d B (%d requests)", c.Size, c.Requests))
	}
	if len(cs) == 0 {
		cs = []string{"none"}
	}
	if a.Note != "" {
		ew.para("", "  ", "note: "+a.Note)
	}
	ew.list("", "  ", "candidates: ", cs)
	if a.BaseFailed {
		ew.printf("\n")
		ew.para("", "  ", "no pool suggested: "+a.Stop)
		return ew.err
	}
	baseline := fmt.Sprintf("baseline: peak footprint %s, peak live %s (%.3f)", size.Format(a.Baseline.PeakFootprint), size.Format(a.Baseline.PeakLive), fpOverLive(a.Baseline.PeakFootprint, a.Baseline.PeakLive))
	if a.Baseline.TraceErrors > 0 {
		baseline += fmt.Sprintf(", %d trace errors (events skipped)", a.Baseline.TraceErrors)
	}
	ew.para("", "  ", baseline)
	ew.para("", "  ", fmt.Sprintf("threshold: %s (%s)", size.Format(a.Threshold), a.ThresholdRule))
	ew.printf("\n")
	for i, r := range a.Rounds {
		var ts []string
		for _, t := range r {
			if t.Error != "" {
				ts = append(ts, fmt.Sprintf("%d B failed (%s)", t.Size, t.Error))
			} else {
				ts = append(ts, fmt.Sprintf("%d B %s", t.Size, size.Format(t.Saving)))
			}
		}
		ew.list("", "  ", fmt.Sprintf("round %d, saving per candidate: ", i+1), ts)
	}
	if len(a.Pools) == 0 {
		ew.printf("\n")
		ew.para("", "  ", "no pool suggested: "+a.Stop)
		return ew.err
	}
	t := table{heads: []string{"#", "size", "saving", "requests", "peak footprint after", "pool footprint", "pool live", "waste"},
		left: make([]bool, 8), headline: 3}
	for i, p := range a.Pools {
		t.add("", strconv.Itoa(i+1), fmt.Sprintf("%d B", p.Size), fmt.Sprintf("%s (%.2f%%)", size.Format(p.Saving), p.SavingPercent), strconv.FormatInt(p.Requests, 10),
			size.Format(p.PeakFootprint), size.Format(p.Footprint), size.Format(p.Live), size.Format(p.Waste))
	}
	heading := "suggested pools (saving: the peak footprint the pool took off, in its round; the rest at the final peak"
	if t.kept("  ", width) == len(t.heads) {
		heading += "; waste = the pool's footprint - live"
	}
	ew.printf("\n")
	ew.para("", "  ", heading+")")
	t.write(ew, "  ")
	for i, p := range a.Pools {
		if sites := a.sitesOf(p.Size); len(sites) > 0 {
			ew.list("", "  ", fmt.Sprintf("pool %d (%d B) takes its requests from ", i+1, p.Size), sites)
		}
	}
	saved := a.Baseline.PeakFootprint - a.FinalPeakFootprint
	ew.para("", "  ", fmt.Sprintf("final: peak footprint %s, %s (%.2f%%) below the baseline, %.3f of peak live", size.Format(a.FinalPeakFootprint), size.Format(saved), 100*float64(saved)/float64(a.Baseline.PeakFootprint), fpOverLive(a.FinalPeakFootprint, a.Baseline.PeakLive)))
	ew.para("", "  ", "stopped: "+a.Stop)
	ew.printf("\n")
	ew.code("\t", a.Go)
	return ew.err
}

// sitesOf lists the sites that request size most, each with its share
// of the size's requests, or none in a trace without sites.
func (a *Advice) sitesOf(size int) []string {
	i := slices.IndexFunc(a.Candidates, func(c SizeCount) bool { return c.Size == size })
	if i < 0 || len(a.Candidates[i].Sites) == 0 {
		return nil
	}
	c := a.Candidates[i]
	var parts []string
	for _, st := range c.Sites {
		parts = append(parts, fmt.Sprintf("%s (%.1f%%)", st.Site, 100*float64(st.Requests)/float64(c.Requests)))
	}
	return parts
}

// fpOverLive returns fp / live, or 0 when live is.
func fpOverLive(fp, live int64) float64 {
	if live == 0 {
		return 0
	}
	return float64(fp) / float64(live)
}
