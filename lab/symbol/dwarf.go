package symbol

import (
	"bytes"
	"cmp"
	"debug/dwarf"
	"debug/elf"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// readDWARF returns f's debug information, nil (and no error) where it
// has none.
func readDWARF(f *elf.File) (*dwarf.Data, error) {
	var total uint64
	found := false
	for _, s := range f.Sections {
		if s.Type == elf.SHT_NOBITS || !strings.HasPrefix(s.Name, ".debug_") && !strings.HasPrefix(s.Name, ".zdebug_") {
			continue
		}
		total += s.Size
		found = found || strings.HasSuffix(s.Name, "debug_info")
	}
	if !found {
		return nil, nil
	}
	if total > MaxDebugBytes {
		return nil, fmt.Errorf("its debug information (%d bytes) is more than %d: named by its symbol table alone", total, MaxDebugBytes)
	}
	d, err := f.DWARF()
	if err != nil {
		return nil, fmt.Errorf("debug information: %w", err)
	}
	return d, nil
}

// findDebug opens the separate debug file of the binary f at path: the
// one its build ID names under DebugRoot/.build-id, or the one its
// .gnu_debuglink names (beside the binary, in its .debug directory, or
// under DebugRoot) whose checksum matches. It returns no file and no
// error where there is none, an error where one found cannot be used.
func findDebug(path string, f *elf.File) (*elf.File, error) {
	if id := buildID(f); len(id) > 1 {
		h := fmt.Sprintf("%x", id)
		if d, err := openELF(filepath.Join(DebugRoot, ".build-id", h[:2], h[2:]+".debug")); err == nil {
			return d, nil
		}
	}
	s := f.Section(".gnu_debuglink")
	if s == nil {
		return nil, nil
	}
	data, err := s.Data()
	if err != nil {
		return nil, fmt.Errorf(".gnu_debuglink: %w", err)
	}
	name, rest, ok := bytes.Cut(data, []byte{0})
	if !ok || len(name) == 0 || bytes.ContainsRune(name, '/') {
		return nil, errors.New(".gnu_debuglink: malformed")
	}
	pad := (4 - (len(name)+1)%4) % 4
	if len(rest) < pad+4 {
		return nil, errors.New(".gnu_debuglink: malformed")
	}
	want := f.ByteOrder.Uint32(rest[pad:])
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		real = path
	}
	dir := filepath.Dir(real)
	var errs []error
	for _, p := range []string{filepath.Join(dir, string(name)), filepath.Join(dir, ".debug", string(name)), filepath.Join(DebugRoot, dir, string(name))} {
		if p == real {
			continue
		}
		sum, err := checksum(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err == nil && sum != want {
			err = fmt.Errorf("%s: its checksum is not the one %s names", p, filepath.Base(path))
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		d, err := openELF(p)
		if err == nil {
			return d, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// buildID returns the GNU build ID of f, none where it has no
// .note.gnu.build-id.
func buildID(f *elf.File) []byte {
	s := f.Section(".note.gnu.build-id")
	if s == nil {
		return nil
	}
	data, err := s.Data()
	if err != nil || len(data) < 16 {
		return nil
	}
	namesz, descsz, typ := f.ByteOrder.Uint32(data), f.ByteOrder.Uint32(data[4:]), f.ByteOrder.Uint32(data[8:])
	const ntGNUBuildID = 3
	nameEnd := 12 + (uint64(namesz)+3)&^3
	if typ != ntGNUBuildID || namesz != 4 || string(data[12:15]) != "GNU" || nameEnd+uint64(descsz) > uint64(len(data)) {
		return nil
	}
	return data[nameEnd : nameEnd+uint64(descsz)]
}

// checksum returns the CRC-32 of the file at path, .gnu_debuglink's.
func checksum(path string) (uint32, error) {
	if err := regular(path); err != nil {
		return 0, err
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	h := crc32.NewIEEE()
	if _, err := io.Copy(h, f); err != nil {
		return 0, err
	}
	return h.Sum32(), nil
}

// indexUnits finds the address ranges of b's compilation units.
func (b *binary) indexUnits() error {
	r := b.dw.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			return fmt.Errorf("debug information: %w", err)
		}
		if e == nil {
			break
		}
		if e.Tag == dwarf.TagCompileUnit || e.Tag == dwarf.TagPartialUnit {
			ranges, err := b.dw.Ranges(e)
			if err == nil {
				for _, rg := range ranges {
					if rg[0] < rg[1] {
						b.cus = append(b.cus, cuRange{rg[0], rg[1], e.Offset})
					}
				}
			}
		}
		r.SkipChildren()
	}
	slices.SortFunc(b.cus, func(x, y cuRange) int { return cmp.Compare(x.lo, y.lo) })
	return nil
}

// A unit is one compilation unit's line table and scopes.
type unit struct {
	lines  []lineRange
	files  []*dwarf.LineFile
	scopes []scope
}

// A lineRange is one row of a line table: the addresses [lo, hi) come
// from line of file.
type lineRange struct {
	lo, hi uint64
	file   string
	line   int
}

// A scope is a function or an inlined call of one.
type scope struct {
	ranges   [][2]uint64
	depth    int // how many scopes it is inside
	name     string
	ref      dwarf.Offset // the entry naming it, where name is ""
	callFile int          // an inlined call's site, in the scope around it
	callLine int
}

// unit returns the compilation unit covering addr, reading it at its
// first use; nil for none.
func (b *binary) unit(addr uint64) *unit {
	i := sort.Search(len(b.cus), func(i int) bool { return b.cus[i].lo > addr })
	for j := i - 1; j >= 0 && j >= i-8; j-- {
		c := b.cus[j]
		if addr < c.hi {
			u, ok := b.units[c.off]
			if !ok {
				u = b.readUnit(c.off)
				b.units[c.off] = u
			}
			return u
		}
	}
	return nil
}

// readUnit reads the compilation unit at off. A unit whose entries do not
// parse keeps what was read before.
func (b *binary) readUnit(off dwarf.Offset) *unit {
	u := &unit{}
	r := b.dw.Reader()
	r.Seek(off)
	cu, err := r.Next()
	if err != nil || cu == nil {
		return u
	}
	if lr, err := b.dw.LineReader(cu); err == nil && lr != nil {
		var prev dwarf.LineEntry
		have := false
		for {
			var e dwarf.LineEntry
			if err := lr.Next(&e); err != nil {
				break
			}
			if have && e.Address > prev.Address && prev.File != nil {
				u.lines = append(u.lines, lineRange{prev.Address, e.Address, prev.File.Name, prev.Line})
			}
			prev, have = e, !e.EndSequence
		}
		u.files = lr.Files()
		slices.SortStableFunc(u.lines, func(x, y lineRange) int { return cmp.Compare(x.lo, y.lo) })
	}
	if !cu.Children {
		return u
	}
	var open []int // per entry open around the current one: its scope's index, or -1
	depth := func() int {
		n := 0
		for _, s := range open {
			if s >= 0 {
				n++
			}
		}
		return n
	}
	for {
		e, err := r.Next()
		if err != nil || e == nil {
			break
		}
		if e.Tag == 0 {
			if len(open) == 0 {
				break // the unit's end
			}
			open = open[:len(open)-1]
			continue
		}
		idx := -1
		if e.Tag == dwarf.TagSubprogram || e.Tag == dwarf.TagInlinedSubroutine {
			if ranges, err := b.dw.Ranges(e); err == nil && len(ranges) > 0 {
				s := scope{ranges: ranges, depth: depth()}
				s.name, _ = e.Val(dwarf.AttrName).(string)
				if s.name == "" {
					s.ref = nameRef(e)
				}
				if v, ok := e.Val(dwarf.AttrCallFile).(int64); ok {
					s.callFile = int(v)
				}
				if v, ok := e.Val(dwarf.AttrCallLine).(int64); ok {
					s.callLine = int(v)
				}
				idx = len(u.scopes)
				u.scopes = append(u.scopes, s)
			}
		}
		if e.Children {
			open = append(open, idx)
		}
	}
	return u
}

// nameRef returns the entry that names e (its abstract origin or the
// declaration it specifies), 0 for none.
func nameRef(e *dwarf.Entry) dwarf.Offset {
	for _, a := range []dwarf.Attr{dwarf.AttrAbstractOrigin, dwarf.AttrSpecification} {
		if off, ok := e.Val(a).(dwarf.Offset); ok {
			return off
		}
	}
	return 0
}

// line returns the file and line of addr in u's line table ("" and 0
// for none).
func (u *unit) line(addr uint64) (string, int) {
	i := sort.Search(len(u.lines), func(i int) bool { return u.lines[i].lo > addr })
	if i > 0 && addr < u.lines[i-1].hi {
		return u.lines[i-1].file, u.lines[i-1].line
	}
	return "", 0
}

// file returns the name of file i of u's line table.
func (u *unit) file(i int) string {
	if i >= 0 && i < len(u.files) && u.files[i] != nil {
		return u.files[i].Name
	}
	return ""
}

// scopesAt returns the scopes covering addr, the function first and the
// innermost inlined call last.
func (u *unit) scopesAt(addr uint64) []scope {
	var in []scope
	for _, s := range u.scopes {
		for _, r := range s.ranges {
			if r[0] <= addr && addr < r[1] {
				in = append(in, s)
				break
			}
		}
	}
	slices.SortStableFunc(in, func(x, y scope) int { return x.depth - y.depth })
	return in
}

// name returns the name of scope s, following its references.
func (b *binary) name(s scope) string {
	if s.name != "" {
		return s.name
	}
	off := s.ref
	for hops := 0; off != 0 && hops < 8; hops++ {
		if n, ok := b.names[off]; ok {
			return n
		}
		r := b.dw.Reader()
		r.Seek(off)
		e, err := r.Next()
		if err != nil || e == nil {
			break
		}
		if n, _ := e.Val(dwarf.AttrName).(string); n != "" {
			b.names[s.ref] = n
			return n
		}
		off = nameRef(e)
	}
	b.names[s.ref] = ""
	return ""
}
