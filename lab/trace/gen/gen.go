package gen

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/carvelab/carve/lab/trace"
)

// Param is one parameter of a Generator.
type Param struct {
	Name    string
	Doc     string
	Default float64
	// Min and Max bound the value; Int says it must be a whole number.
	Min, Max float64
	Int      bool
}

// Args are the values of a Generator's parameters by name; a parameter
// left out takes its default.
type Args map[string]float64

// Generator writes a synthetic trace: one of the block-allocator article's scenarios, or a
// workload with explicit random seeds. The same arguments always give the
// same trace, event for event, on any machine.
//
// Generated traces number their objects 1, 2, 3... in order of birth and
// have Thread 0.
type Generator struct {
	// Name is what carve gen takes ("connection", "zipf"...).
	Name string
	// Doc says what the trace is, in a few sentences.
	Doc string
	// Compare is the figure its source gives to compare a replay with, or
	// "".
	Compare string
	// Params are the parameters, with their defaults and bounds.
	Params []Param

	gen    func(w trace.EventWriter, a Args) error
	phases func(a Args) []Phase // nil: the trace has no phases worth naming
	check  func(a Args) error   // nil: each parameter's bounds are all there is to check
}

// Phase is a named stretch of a generated trace: the events after the
// previous phase's End, up to and including event End (counting from 1).
type Phase struct {
	Name string
	End  int64
}

// Phases returns the phases of the trace Generate writes for args, in
// order (the last one ends at the trace's last event), or nil for a
// generator whose trace has no phases worth naming. The block-allocator article's scenarios
// have them: the lesson is in how much the heap grows in the last.
func (g Generator) Phases(args Args) ([]Phase, error) {
	full, err := g.resolve(args)
	if err != nil || g.phases == nil {
		return nil, err
	}
	var ps []Phase
	for _, p := range g.phases(full) {
		if len(ps) > 0 && p.End == ps[len(ps)-1].End {
			continue // an empty phase (a parameter of 0)
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// All returns every generator, sorted by name.
func All() []Generator {
	gs := []Generator{connectionGen, carvingGen, bumpGen, zipfGen, phasesGen, randFreeGen}
	slices.SortFunc(gs, func(a, b Generator) int { return strings.Compare(a.Name, b.Name) })
	return gs
}

// Lookup returns the generator called name.
func Lookup(name string) (Generator, bool) {
	for _, g := range All() {
		if g.Name == name {
			return g, true
		}
	}
	return Generator{}, false
}

// Generate writes the generator's trace to w. An argument that names no
// parameter, falls outside its bounds or does not fit with the others (a
// min above a max) is an error, and nothing is written. Generate stops at
// w's first error and returns it.
func (g Generator) Generate(w trace.EventWriter, args Args) error {
	if g.gen == nil {
		return fmt.Errorf("trace: generator %q is not one of gen.All()", g.Name)
	}
	full, err := g.resolve(args)
	if err != nil {
		return err
	}
	return g.gen(w, full)
}

// Defaults returns the default value of every parameter.
func (g Generator) Defaults() Args {
	a := make(Args, len(g.Params))
	for _, p := range g.Params {
		a[p.Name] = p.Default
	}
	return a
}

// resolve checks args, fills in the defaults and checks them together.
func (g Generator) resolve(args Args) (Args, error) {
	full := g.Defaults()
	for name, v := range args {
		i := slices.IndexFunc(g.Params, func(p Param) bool { return p.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("trace: generator %s has no parameter %q (it has %s)", g.Name, name, g.paramNames())
		}
		p := g.Params[i]
		if math.IsNaN(v) || v < p.Min || v > p.Max || p.Int && v != math.Trunc(v) {
			kind := "a number"
			if p.Int {
				kind = "a whole number"
			}
			return nil, fmt.Errorf("trace: generator %s: %s = %v, want %s from %v to %v", g.Name, name, v, kind, p.Min, p.Max)
		}
		full[name] = v
	}
	if g.check != nil {
		if err := g.check(full); err != nil {
			return nil, err
		}
	}
	return full, nil
}

func (g Generator) paramNames() string {
	names := make([]string, len(g.Params))
	for i, p := range g.Params {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

// ParseArgs reads arguments written "name=value", as carve gen takes
// them after the generator's name, and checks them as Generate does.
func (g Generator) ParseArgs(kv []string) (Args, error) {
	a := make(Args, len(kv))
	for _, s := range kv {
		name, val, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fmt.Errorf("trace: generator %s: argument %q, want name=value", g.Name, s)
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return nil, fmt.Errorf("trace: generator %s: %s=%q, want a number", g.Name, name, val)
		}
		a[name] = v
	}
	if _, err := g.resolve(a); err != nil {
		return nil, err
	}
	return a, nil
}

// emitter hands out IDs in order of birth and stops at the first error
// of the writer, so that generators read as straight-line scenarios.
type emitter struct {
	w    trace.EventWriter
	next uint64
	err  error
}

func newEmitter(w trace.EventWriter) *emitter { return &emitter{w: w, next: 1} }

// alloc writes an allocation of size bytes and returns its ID.
func (e *emitter) alloc(size uint64) uint64 {
	id := e.next
	e.next++
	e.write(trace.Event{Op: trace.Alloc, ID: id, Size: size})
	return id
}

// allocN writes n allocations of size bytes.
func (e *emitter) allocN(n int, size uint64) {
	for range n {
		if e.err != nil {
			return
		}
		e.alloc(size)
	}
}

// free writes the free of id.
func (e *emitter) free(id uint64) { e.write(trace.Event{Op: trace.Free, ID: id}) }

func (e *emitter) write(ev trace.Event) {
	if e.err == nil {
		e.err = e.w.Write(ev)
	}
}
