package trace

import (
	"path/filepath"
	"strconv"
	"strings"
)

// Call stacks of C programs: carve's recorder (its "stack" and "module"
// lines, see aosp.go) and heaptrack's data keep a call stack for each
// allocation. A Reader of those formats gives every allocation whose stack
// it knows a label of no name whose AttrSite is the stack's innermost
// frame, named by SiteName: the function that called the allocator, as
// heaptrack's "PEAK MEMORY CONSUMERS" names its places. The addresses are
// named by ReaderOptions.Symbolizer (package symbol reads the binaries'
// symbol tables and DWARF); without one, or where it knows none, a site
// is the module and the offset of its return address.

// A Module is a binary loaded in the recorded process: an executable or
// a shared library, mapped from Lo up to Hi (absolute addresses), Base
// the bias added to its ELF addresses (dl_iterate_phdr's dlpi_addr; 0 for
// an executable that is not position independent).
type Module struct {
	Path         string
	Base, Lo, Hi uint64
}

// A Frame is one function of a call stack at an address: an inlined
// function is a frame of its own, before the function it was inlined in.
// File and Line are 0 and "" where the binary has no line table.
type Frame struct {
	Function string
	File     string
	Line     int
}

// A Symbolizer names code addresses: Frames returns the frames at
// address pc of module m, the innermost (an inlined function's) first, or
// none when the binary has no symbol there. pc is an address inside the
// call instruction (a return address less one). Frames is called from
// one goroutine at a time.
type Symbolizer interface {
	Frames(m Module, pc uint64) []Frame
}

// SiteName names the allocation site of a stack whose innermost return
// address is ret, in module m (a zero Module for none known): the
// innermost of frames (the Symbolizer's for ret-1) as
// "function (file.c:line)", or "function (module)" where the binary has
// no line table, or "module+0xoffset" (ret's offset from the module's
// Base; "0x<ret> (module)" for a module of no known address, "0x<ret>"
// with no module) where it has no symbol.
func SiteName(frames []Frame, m Module, ret uint64) string {
	mod := filepath.Base(m.Path)
	if len(frames) > 0 && frames[0].Function != "" {
		f := frames[0]
		if f.File != "" && f.Line > 0 {
			return f.Function + " (" + filepath.Base(f.File) + ":" + strconv.Itoa(f.Line) + ")"
		}
		if m.Path != "" {
			return f.Function + " (" + mod + ")"
		}
		return f.Function
	}
	switch {
	case m.Path == "":
		return "0x" + strconv.FormatUint(ret, 16)
	case m.Hi == 0: // a module of no known address
		return "0x" + strconv.FormatUint(ret, 16) + " (" + mod + ")"
	}
	return mod + "+0x" + strconv.FormatUint(ret-m.Base, 16)
}

// SiteUnnamed reports whether site, as SiteName names it, is an address
// that no symbol named ("module+0x..." or "0x...").
func SiteUnnamed(site string) bool {
	return strings.HasPrefix(site, "0x") || strings.Contains(site, "+0x") && !strings.Contains(site, " ")
}
