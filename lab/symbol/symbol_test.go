package symbol

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/carvelab/carve/lab/internal/testneed"
	"github.com/carvelab/carve/lab/trace"
)

// need skips the test when a tool it needs is missing (err), or fails it
// under CI=true (testneed.Tool).
var need = testneed.Tool

// prog prints the return address of where's call in inner (inlined in
// outer), and main's address, from which the test finds the load bias.
const prog = `#include <stdio.h>
int main(void);
__attribute__((noinline)) void where(void) {
	printf("%p %p\n", __builtin_return_address(0), (void *)&main);
}
static inline __attribute__((always_inline)) void inner(void) {
	where(); /* line 7 */
	__asm__ volatile("");
}
__attribute__((noinline)) void outer(void) {
	inner(); /* line 11 */
	__asm__ volatile("");
}
int main(void) { outer(); return 0; }
`

// build compiles prog with flags into dir, then runs post (a shell
// command on the binary $B, in dir), and returns the binary's path.
func build(t *testing.T, dir, name string, flags []string, post string) string {
	t.Helper()
	src := filepath.Join(dir, "prog.c")
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	args := append([]string{"-O2", "-fno-optimize-sibling-calls", "-o", bin, src}, flags...)
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if post != "" {
		cmd := exec.Command("sh", "-c", post)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), "B="+bin)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", post, err, out)
		}
	}
	return bin
}

// run runs bin and returns the module it ran as (its load bias from
// main's address) and the return address it printed.
func run(t *testing.T, bin string, mainAddr uint64) (trace.Module, uint64) {
	t.Helper()
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatalf("%s: %v", bin, err)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		t.Fatalf("%s printed %q", bin, out)
	}
	ret, err1 := strconv.ParseUint(strings.TrimPrefix(f[0], "0x"), 16, 64)
	m, err2 := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("%s printed %q", bin, out)
	}
	return trace.Module{Path: bin, Base: m - mainAddr, Lo: m - mainAddr, Hi: ^uint64(0)}, ret
}

// mainAddress returns the address of main in the symbol table of the
// unstripped binary at path.
func mainAddress(t *testing.T, path string) uint64 {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if s.Name == "main" {
			return s.Value
		}
	}
	t.Fatal("no main")
	return 0
}

func TestFrames(t *testing.T) {
	_, err := exec.LookPath("gcc")
	need(t, "gcc", err)
	full := []trace.Frame{{Function: "inner", File: "prog.c", Line: 7}, {Function: "outer", File: "prog.c", Line: 11}}
	tests := []struct {
		name  string
		flags []string
		post  string // a shell command on the binary $B
		debug bool   // DebugRoot: the test's own
		want  []trace.Frame
		err   string // in Err, "" for nil
	}{
		{"pie", []string{"-g", "-pie", "-fPIE"}, "", false, full, ""},
		{"no-pie", []string{"-g", "-no-pie"}, "", false, full, ""},
		{"dwarf4", []string{"-gdwarf-4"}, "", false, full, ""},
		{"no debug information", nil, "", false, []trace.Frame{{Function: "outer"}}, ""},
		{"stripped", []string{"-g"}, "strip $B", false, nil, "stripped"},
		{"stripped, exported", []string{"-g", "-rdynamic"}, "strip $B", false, []trace.Frame{{Function: "outer"}}, "stripped"},
		{"debuglink", []string{"-g"}, "objcopy --only-keep-debug $B $B.debug && strip $B && objcopy --add-gnu-debuglink=$B.debug $B", false, full, ""},
		{"debuglink in .debug", []string{"-g"}, "mkdir .debug && objcopy --only-keep-debug $B .debug/$(basename $B).debug && strip $B && objcopy --add-gnu-debuglink=.debug/$(basename $B).debug $B", false, full, ""},
		{"debuglink checksum", []string{"-g"}, "objcopy --only-keep-debug $B $B.debug && strip $B && objcopy --add-gnu-debuglink=$B.debug $B && echo >> $B.debug", false, nil, "checksum"},
		{"build id", []string{"-g", "-Wl,--build-id"}, `id=$(readelf -n $B | sed -n 's/.*Build ID: //p') && mkdir -p debug/.build-id/$(echo $id | cut -c1-2) && objcopy --only-keep-debug $B debug/.build-id/$(echo $id | cut -c1-2)/$(echo $id | cut -c3-).debug && strip $B`, true, full, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.debug {
				old := DebugRoot
				DebugRoot = filepath.Join(dir, "debug")
				t.Cleanup(func() { DebugRoot = old })
			}
			// main's address, from a build of the same flags unstripped
			ref := build(t, t.TempDir(), "prog", tt.flags, "")
			bin := build(t, dir, "prog", tt.flags, tt.post)
			m, ret := run(t, bin, mainAddress(t, ref))
			tab := New()
			defer tab.Close()
			got := tab.Frames(m, ret-1)
			for i := range got {
				if got[i].File != "" {
					got[i].File = filepath.Base(got[i].File)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("Frames = %v, want %v", got, tt.want)
			}
			err := tab.Err(bin)
			switch {
			case tt.err == "" && err != nil:
				t.Errorf("Err = %v, want nil", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("Err = %v, want one saying %q", err, tt.err)
			}
			if failed := tab.Failed(); (len(failed) > 0) != (tt.err != "") {
				t.Errorf("Failed = %q", failed)
			}
		})
	}
}

func TestFramesOfNoBinary(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "text")
	if err := os.WriteFile(text, []byte("not ELF"), 0o644); err != nil {
		t.Fatal(err)
	}
	tab := New()
	defer tab.Close()
	for _, p := range []string{filepath.Join(dir, "missing"), text, dir, "/dev/zero", ""} {
		if f := tab.Frames(trace.Module{Path: p, Hi: 1 << 40}, 0x1000); f != nil {
			t.Errorf("Frames of %q = %v", p, f)
		}
		if tab.Err(p) == nil {
			t.Errorf("Err(%q) = nil", p)
		}
	}
	if got := tab.Failed(); len(got) != 5 {
		t.Errorf("Failed = %q, want the 5 paths", got)
	}
	if f := tab.Frames(trace.Module{Path: text, Base: 0x2000}, 0x1000); f != nil {
		t.Errorf("an address below the module's base: %v", f)
	}
}

// TestLibc names malloc's code in the C library this test is linked
// with, by its debug file (Debian's libc6-dbg) where one is installed.
func TestLibc(t *testing.T) {
	path := "/lib/x86_64-linux-gnu/libc.so.6"
	f, err := elf.Open(path)
	need(t, "the C library at "+path, err)
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	var malloc uint64
	for _, s := range syms {
		if s.Name == "malloc" {
			malloc = s.Value
		}
	}
	if malloc == 0 {
		t.Fatal("no malloc in libc's dynamic symbols")
	}
	debug, derr := findDebug(path, f)
	need(t, "libc's debug file (libc6-dbg)", derr)
	if debug == nil {
		need(t, "libc's debug file (libc6-dbg)", fmt.Errorf("none under %s", DebugRoot))
	}
	debug.Close()
	tab := New()
	defer tab.Close()
	got := tab.Frames(trace.Module{Path: path, Base: 0x7f0000000000}, 0x7f0000000000+malloc+4)
	if len(got) == 0 || got[len(got)-1].Function != "__libc_malloc" && got[len(got)-1].Function != "malloc" || !strings.HasSuffix(got[0].File, ".c") {
		t.Errorf("Frames at malloc+4 = %v, want malloc's, with its file", got)
	}
	if err := tab.Err(path); err != nil {
		t.Errorf("Err = %v", err)
	}
}
