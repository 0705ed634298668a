package trace

import (
	"cmp"
	"fmt"
	"slices"
)

// The stacks of a C trace, as its Reader keeps them: the modules loaded
// (a sorted list of address ranges), and the label of each stack the
// trace defined, made when the stack was defined (with the modules then
// loaded: a library unloaded and another loaded at its addresses later
// names later stacks only).

// MaxStacks is the most stacks (carve's "stack" lines, heaptrack's trace
// nodes) the C importers keep: 8 bytes each and a map entry, 256 MiB at
// most. Past it the Reader returns an error that says so and matches
// ErrTooManyLive (errors.Is).
const MaxStacks = 1 << 23

// MaxModules bounds the modules a trace may load at once: a process
// maps some hundreds.
const MaxModules = 1 << 16

type errTooManyStacks struct{ what string }

func (e errTooManyStacks) Error() string      { return "trace: too many " + e.what }
func (errTooManyStacks) Is(target error) bool { return target == ErrTooManyLive }

type cStacks struct {
	sym     Symbolizer
	modules []Module          // sorted by Lo, none overlapping
	label   map[uint64]uint32 // stack ID -> its label (0: a stack of no frame)
	sites   map[uint64]uint32 // return address -> the label of its site, as found
}

// module returns the module that maps address pc, or a zero Module.
func (c *cStacks) module(pc uint64) Module {
	i, _ := slices.BinarySearchFunc(c.modules, pc, func(m Module, pc uint64) int {
		switch {
		case m.Hi <= pc:
			return -1
		case m.Lo > pc:
			return 1
		}
		return 0
	})
	if i < len(c.modules) && c.modules[i].Lo <= pc && pc < c.modules[i].Hi {
		return c.modules[i]
	}
	return Module{}
}

// load records module m, in place of those it overlaps (unloaded).
func (c *cStacks) load(m Module) error {
	c.modules = slices.DeleteFunc(c.modules, func(o Module) bool { return o.Lo < m.Hi && m.Lo < o.Hi })
	if len(c.modules) >= MaxModules {
		return errTooManyStacks{"modules"}
	}
	i, _ := slices.BinarySearchFunc(c.modules, m.Lo, func(o Module, lo uint64) int { return cmp.Compare(o.Lo, lo) })
	c.modules = slices.Insert(c.modules, i, m)
	return nil
}

// siteLabel returns the label of the site whose innermost return address
// is ret, interning it in labels at its first use.
func (c *cStacks) siteLabel(labels *Labels, ret uint64) (uint32, error) {
	if l, ok := c.sites[ret]; ok {
		return l, nil
	}
	m := c.module(ret)
	var frames []Frame
	if c.sym != nil && m.Path != "" && ret > 0 {
		frames = c.sym.Frames(m, ret-1)
	}
	l, err := labels.Intern(Label{Attrs: []Attr{{AttrSite, SiteName(frames, m, ret)}}})
	if err != nil {
		return 0, err
	}
	if c.sites == nil {
		c.sites = map[uint64]uint32{}
	}
	c.sites[ret] = l
	return l, nil
}

// define records stack id, whose innermost return address is ret (0: a
// stack of no frame, which gives no label).
func (c *cStacks) define(labels *Labels, id, ret uint64) error {
	if c.label == nil {
		c.label = map[uint64]uint32{}
	}
	if _, ok := c.label[id]; !ok && len(c.label) >= MaxStacks {
		return errTooManyStacks{"stacks"}
	}
	var l uint32
	if ret != 0 {
		var err error
		if l, err = c.siteLabel(labels, ret); err != nil {
			return err
		}
	}
	c.label[id] = l
	return nil
}

// stackLabel returns the label of stack id; ok is false when the trace
// did not define it.
func (c *cStacks) stackLabel(id uint64) (l uint32, ok bool) {
	l, ok = c.label[id]
	return l, ok
}

// carve's recorder's lines (preload/carve.c in package record), among
// the AOSP records, each before the first record that needs it:
//
//	module <base> <lo> <hi> <path>       a binary mapped from lo to hi, its ELF addresses biased by base
//	stack <id> <ret> [<ret> ...]         a call stack: its return addresses, innermost first
//
// and an allocation's record ends with "@<id>", the stack of its call.
const (
	aospModule = `"module <base> <lo> <hi> <path>" (hexadecimal addresses)`
	aospStack  = `"stack <id> <return address> ..." (a decimal id, hexadecimal addresses)`
)

// parseAOSPModule reads a "module" line.
func (r *Reader) parseAOSPModule(line []byte) (bool, error) {
	var m Module
	i, ok := len("module"), true
	for _, f := range []*uint64{&m.Base, &m.Lo, &m.Hi} {
		if *f, i, ok = xptrField(line, i); !ok {
			return false, r.syntaxError("module", aospModule, line)
		}
	}
	j, ok := space(line, i)
	if !ok || j == len(line) || m.Lo >= m.Hi {
		return false, r.syntaxError("module", aospModule+" with lo below hi", line)
	}
	m.Path = string(line[j:])
	if err := r.cstacks.load(m); err != nil {
		return false, fmt.Errorf("%s:%d: %w (more than %d)", r.name, r.lines.n, err, MaxModules)
	}
	return r.skip()
}

// parseAOSPStack reads a "stack" line.
func (r *Reader) parseAOSPStack(line []byte) (bool, error) {
	id, i, ok := decField(line, len("stack"))
	if !ok {
		return false, r.syntaxError("stack", aospStack, line)
	}
	var ret uint64
	for n := 0; !blank(line, i); n++ {
		var pc uint64
		if pc, i, ok = xptrField(line, i); !ok {
			return false, r.syntaxError("stack", aospStack, line)
		}
		if n == 0 {
			ret = pc
		}
	}
	if err := r.cstacks.define(r.labels, id, ret); err != nil {
		return false, fmt.Errorf("%s:%d: %w", r.name, r.lines.n, err)
	}
	return r.skip()
}

// aospRest reads the end of a record from i: nothing but blanks, or
// n timestamps, then maybe "@<stack>" (carve's recorder's), whose label
// it sets in r.site. The error names what (the record) and its syntax.
func (r *Reader) aospRest(line []byte, i, n int, what, syntax string) error {
	r.site = 0
	k, sp := space(line, i)
	if sp && k < len(line) && line[k] != '@' && n > 0 {
		for t := 0; t < n; t++ {
			var ok bool
			if _, i, ok = decField(line, i); !ok {
				return r.syntaxError(what, syntax, line)
			}
		}
		k, sp = space(line, i)
	}
	if blank(line, i) {
		return nil
	}
	if !sp || k >= len(line) || line[k] != '@' {
		return r.syntaxError(what, syntax, line)
	}
	id, k, ok := dec(line, k+1)
	if !ok || !blank(line, k) {
		return r.syntaxError(what, syntax, line)
	}
	if r.site, ok = r.cstacks.stackLabel(id); !ok {
		return r.syntaxError(what, `a stack defined before by a "stack" line`, line)
	}
	return nil
}
