// Package symbol names the code addresses of a C program's call stacks
// after the run, from the program's binaries: the function of an
// address from the ELF symbol table (.symtab, or the exported
// functions of .dynsym where a binary is stripped), and its file, line
// and inlined frames from the DWARF debug information, read from the
// binary itself or from its separate debug file (found by build ID under
// /usr/lib/debug/.build-id, or by .gnu_debuglink, as gdb finds it:
// Debian's -dbg and -dbgsym packages install them there).
//
// A Table reads each binary once, at the first address asked of it, and
// each DWARF compilation unit once, at the first address inside it: a
// run's stacks, deduplicated by the recorder, ask a few thousand
// addresses of a few binaries.
package symbol

import (
	"cmp"
	"debug/dwarf"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/carvelab/carve/lab/trace"
)

// MaxDebugBytes bounds the DWARF sections of one binary that a Table
// reads into memory; a binary with more is named by its symbol table
// alone.
const MaxDebugBytes = 1 << 30

// DebugRoot is the directory holding separate debug files (gdb's
// debug-file-directory).
var DebugRoot = "/usr/lib/debug"

// A Table names the addresses of the binaries it is asked of. Its
// methods are called from one goroutine at a time.
type Table struct {
	bins map[string]*binary
}

// New returns an empty Table.
func New() *Table {
	return &Table{bins: map[string]*binary{}}
}

// Frames returns the frames at address pc of module m (an absolute
// address: m.Base is added to the binary's own addresses), the innermost
// first (a function inlined at pc before the function it was inlined
// in), or none where m's binary cannot be read or no symbol covers pc.
// It implements trace.Symbolizer.
func (t *Table) Frames(m trace.Module, pc uint64) []trace.Frame {
	if pc < m.Base {
		return nil
	}
	b := t.binary(m.Path)
	if b.elf == nil {
		return nil
	}
	return b.frames(pc - m.Base)
}

// Err returns why the binary at path could not be read, in part or at
// all (nil where it was read with its symbol table, or was not asked
// of): a file that is missing or not ELF, a stripped binary with no
// debug file, debug information that does not parse.
func (t *Table) Err(path string) error {
	if b, ok := t.bins[path]; ok {
		return b.err
	}
	return nil
}

// Failed returns, sorted, the paths of the binaries asked of whose Err
// is not nil.
func (t *Table) Failed() []string {
	var paths []string
	for p, b := range t.bins {
		if b.err != nil {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	return paths
}

// Close closes the binaries t read.
func (t *Table) Close() error {
	var errs []error
	for _, b := range t.bins {
		for _, f := range b.files {
			errs = append(errs, f.Close())
		}
		b.files = nil
	}
	return errors.Join(errs...)
}

// A binary is one ELF file's symbols and debug information.
type binary struct {
	elf   *elf.File   // nil: not read (err says why)
	files []*elf.File // to close: the binary and its debug file
	err   error       // why it was read in part, or not at all
	syms  []sym       // by address
	dw    *dwarf.Data // nil: no debug information
	cus   []cuRange   // the compilation units' address ranges, by lo
	units map[dwarf.Offset]*unit
	names map[dwarf.Offset]string // a DIE's name, by reference
}

// A sym is a function of the symbol table, covering [lo, hi).
type sym struct {
	lo, hi uint64
	name   string
	rank   int  // of the aliases at one address, the lowest is the name
	open   bool // of no size: it ends where the next symbol begins
}

type cuRange struct {
	lo, hi uint64
	off    dwarf.Offset
}

// binary returns path's binary, reading it at the first call.
func (t *Table) binary(path string) *binary {
	if b, ok := t.bins[path]; ok {
		return b
	}
	b := &binary{units: map[dwarf.Offset]*unit{}, names: map[dwarf.Offset]string{}}
	t.bins[path] = b
	f, err := openELF(path)
	if err != nil {
		b.err = err
		return b
	}
	b.elf, b.files = f, []*elf.File{f}
	debug, derr := findDebug(path, f)
	if debug != nil {
		b.files = append(b.files, debug)
	}
	b.syms = symbols(f, debug)
	var errs []error
	if b.dw, err = readDWARF(f); err == nil && b.dw == nil && debug != nil {
		b.dw, err = readDWARF(debug)
	}
	if err != nil {
		errs = append(errs, err)
	}
	if b.dw != nil {
		if err := b.indexUnits(); err != nil {
			errs = append(errs, err)
		}
	}
	if b.dw == nil && !hasSection(f, ".symtab") && (debug == nil || !hasSection(debug, ".symtab")) {
		why := "stripped, and no debug file found"
		if derr != nil {
			why = "stripped, and its debug file " + derr.Error()
		}
		errs = append(errs, fmt.Errorf("%s: only its %d exported functions are named (install its debug symbols: Debian's -dbg or -dbgsym package)", why, len(b.syms)))
	}
	b.err = errors.Join(errs...)
	return b
}

// openELF opens the ELF file at path, which must be a regular file.
func openELF(path string) (*elf.File, error) {
	if err := regular(path); err != nil {
		return nil, err
	}
	return elf.Open(path)
}

// regular returns an error unless path names a regular file: a trace's
// module paths may name a device or a pipe, which reading would block on
// or never end.
func regular(path string) error {
	if path == "" {
		return errors.New("no path")
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", path)
	}
	return nil
}

func hasSection(f *elf.File, name string) bool {
	s := f.Section(name)
	return s != nil && s.Type != elf.SHT_NOBITS
}

// symbols returns the functions of the symbol table of f, or of its
// debug file, or, failing both, of f's dynamic symbols, sorted by
// address, each alias at one address but the best named dropped.
func symbols(f, debug *elf.File) []sym {
	var all []elf.Symbol
	var secs []*elf.Section
	for _, g := range []*elf.File{f, debug} {
		if g == nil {
			continue
		}
		if s, err := g.Symbols(); err == nil && len(s) > 0 {
			all, secs = s, g.Sections
			break
		}
	}
	if all == nil {
		all, _ = f.DynamicSymbols()
		secs = f.Sections
	}
	var syms []sym
	for _, s := range all {
		typ := elf.ST_TYPE(s.Info)
		if typ != elf.STT_FUNC && typ != elf.STT_GNU_IFUNC || s.Section == elf.SHN_UNDEF || s.Value == 0 {
			continue
		}
		hi := s.Value + s.Size
		if s.Size == 0 { // an assembler's function: up to the next symbol or its section's end
			hi = 0
			if int(s.Section) < len(secs) {
				sec := secs[s.Section]
				hi = sec.Addr + sec.Size
			}
		}
		name, _, _ := strings.Cut(s.Name, "@") // a versioned name: malloc@@GLIBC_2.2.5
		syms = append(syms, sym{lo: s.Value, hi: hi, name: name, rank: rank(s), open: s.Size == 0})
	}
	slices.SortFunc(syms, func(a, b sym) int {
		return cmp.Or(cmp.Compare(a.lo, b.lo), cmp.Compare(a.rank, b.rank), cmp.Compare(a.name, b.name))
	})
	syms = slices.CompactFunc(syms, func(a, b sym) bool { return a.lo == b.lo })
	for i := range syms {
		if syms[i].open && i+1 < len(syms) && (syms[i].hi == 0 || syms[i].hi > syms[i+1].lo) {
			syms[i].hi = syms[i+1].lo
		}
		if syms[i].hi <= syms[i].lo {
			syms[i].hi = syms[i].lo + 1
		}
	}
	return syms
}

// rank orders the aliases at one address: a global name before a weak
// one before a local one, then the one of fewer leading underscores
// (malloc before __libc_malloc).
func rank(s elf.Symbol) int {
	r := 0
	switch elf.ST_BIND(s.Info) {
	case elf.STB_WEAK:
		r = 100
	case elf.STB_LOCAL:
		r = 200
	}
	return r + len(s.Name) - len(strings.TrimLeft(s.Name, "_"))
}

// symbol returns the name of the function covering addr ("" for none):
// the smallest of the symbols that cover it.
func (b *binary) symbol(addr uint64) string {
	i := sort.Search(len(b.syms), func(i int) bool { return b.syms[i].lo > addr })
	best := -1
	for j := i - 1; j >= 0 && j >= i-16; j-- {
		s := b.syms[j]
		if addr < s.hi && (best < 0 || s.hi-s.lo < b.syms[best].hi-b.syms[best].lo) {
			best = j
		}
	}
	if best < 0 {
		return ""
	}
	return b.syms[best].name
}

// frames returns the frames at addr, an address of the binary's own.
func (b *binary) frames(addr uint64) []trace.Frame {
	fn := b.symbol(addr)
	u := b.unit(addr)
	if u == nil {
		if fn == "" {
			return nil
		}
		return []trace.Frame{{Function: fn}}
	}
	file, line := u.line(addr)
	scopes := u.scopesAt(addr)
	if len(scopes) == 0 {
		if fn == "" {
			return nil
		}
		return []trace.Frame{{Function: fn, File: file, Line: line}}
	}
	// scopes runs from the function out to the innermost inlined one;
	// each inlined scope's call site is the location in the scope
	// around it.
	frames := make([]trace.Frame, 0, len(scopes))
	for i := len(scopes) - 1; i >= 0; i-- {
		s := scopes[i]
		name := b.name(s)
		if name == "" && i == 0 {
			name = fn
		}
		frames = append(frames, trace.Frame{Function: name, File: file, Line: line})
		file, line = u.file(s.callFile), s.callLine
	}
	return frames
}
