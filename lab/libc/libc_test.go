package libc_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/carvelab/carve/lab/libc"
)

// needC skips a test that calls the C allocator in a build without one.
func needC(t *testing.T) {
	t.Helper()
	if !libc.Available() {
		t.Skip("built without cgo: no C allocator")
	}
}

// bytesOf views n bytes of C memory at p as a slice, for tests to read
// and write blocks.
func bytesOf(p unsafe.Pointer, n int) []byte { return unsafe.Slice((*byte)(p), n) }

func TestUnavailable(t *testing.T) {
	if libc.Available() {
		t.Skip("built with cgo")
	}
	if id := libc.Active(); id != (libc.Identity{}) {
		t.Errorf("Active() = %+v, want the zero Identity", id)
	}
	if _, err := libc.Stats(); !errors.Is(err, libc.ErrUnavailable) {
		t.Errorf("Stats() error = %v, want ErrUnavailable", err)
	}
	if _, err := libc.Malloc(8); !errors.Is(err, libc.ErrUnavailable) {
		t.Errorf("Malloc(8) error = %v, want ErrUnavailable", err)
	}
	if _, err := libc.NewLoop(true); !errors.Is(err, libc.ErrUnavailable) {
		t.Errorf("NewLoop(true) error = %v, want ErrUnavailable", err)
	}
	libc.Free(nil)
	if n := libc.UsableSize(nil); n != 0 {
		t.Errorf("UsableSize(nil) = %d, want 0", n)
	}
}

func TestActive(t *testing.T) {
	needC(t)
	if p := os.Getenv("LD_PRELOAD"); p != "" {
		t.Skipf("LD_PRELOAD=%s: another malloc may serve this process", p)
	}
	id := libc.Active()
	if id.Name != "glibc" || !strings.HasPrefix(id.Version, "2.") || !strings.Contains(id.Library, "libc.so") {
		t.Errorf("Active() = %+v, want glibc 2.x from libc.so", id)
	}
}

func TestStats(t *testing.T) {
	needC(t)
	testStats(t)
}

func TestMalloc(t *testing.T) {
	needC(t)
	testMalloc(t)
}

func TestLoop(t *testing.T) {
	needC(t)
	testLoop(t)
}

func TestLoopCloseFrees(t *testing.T) {
	needC(t)
	testLoopCloseFrees(t)
}

// sources is what HeapStats.Source says for each malloc.
var sources = map[string]string{
	"glibc": "mallinfo2", "jemalloc": "mallctl", "tcmalloc": "MallocExtension", "mimalloc": "mi_heap_visit_blocks",
}

// testStats allocates blocks too large for any thread cache and checks
// that the active malloc counts them.
func testStats(t *testing.T) {
	runtime.LockOSThread() // mimalloc counts the calling thread's blocks
	defer runtime.UnlockOSThread()
	testFootprint(t)
	const n, size = 16, 256 << 10
	before, err := libc.Stats()
	if err != nil {
		t.Fatalf("Stats() error: %v", err)
	}
	var blocks []unsafe.Pointer
	for range n {
		p, err := libc.Malloc(size)
		if err != nil {
			t.Fatalf("Malloc(%d) error: %v", size, err)
		}
		blocks = append(blocks, p)
	}
	after, err := libc.Stats()
	for _, p := range blocks {
		libc.Free(p)
	}
	if err != nil {
		t.Fatalf("Stats() error: %v", err)
	}
	t.Logf("%s: before %+v, after %d blocks of %d bytes %+v", libc.Active().Name, before, n, size, after)
	if want := sources[libc.Active().Name]; after.Source != want {
		t.Errorf("Stats().Source = %q, want %q", after.Source, want)
	}
	if after.Allocated <= 0 || after.Footprint < after.Allocated {
		t.Errorf("Stats() = %+v, want Footprint >= Allocated > 0", after)
	}
	// Other C code on this thread (cgo's, the race runtime's) may free a
	// few small blocks meanwhile: allow it 64 KiB.
	if grew, want := after.Allocated-before.Allocated, int64(n*size-64<<10); grew < want {
		t.Errorf("Allocated grew by %d after %d blocks of %d bytes, want at least %d", grew, n, size, want)
	}
}

// testFootprint allocates many small blocks in a heap that has served
// few, then frees every other: Footprint grows by the blocks' bytes, and
// keeps them as the holes stay in the heap. A figure that counts a
// reserve whole from the start (mimalloc's commit, its first 32 MiB) does
// not grow. It runs first, while the heap holds little memory it could
// reuse.
func testFootprint(t *testing.T) {
	const n, size = 8192, 1024
	before, err := libc.Stats()
	if err != nil {
		t.Fatalf("Stats() error: %v", err)
	}
	blocks := make([]unsafe.Pointer, n)
	for i := range blocks {
		if blocks[i], err = libc.Malloc(size); err != nil {
			t.Fatalf("Malloc(%d) error: %v", size, err)
		}
		clear(bytesOf(blocks[i], size))
	}
	full, err := libc.Stats()
	for i := 0; i < n; i += 2 {
		libc.Free(blocks[i])
	}
	holed, err2 := libc.Stats()
	for i := 1; i < n; i += 2 {
		libc.Free(blocks[i])
	}
	if err = errors.Join(err, err2); err != nil {
		t.Fatalf("Stats() error: %v", err)
	}
	t.Logf("%s: %d blocks of %d bytes: before %+v, after %+v, every other freed %+v", libc.Active().Name, n, size, before, full, holed)
	want := int64(n * size * 9 / 10)
	if grew := full.Footprint - before.Footprint; grew < want {
		t.Errorf("Footprint grew by %d with %d blocks of %d bytes, want at least %d", grew, n, size, want)
	}
	if grew := holed.Footprint - before.Footprint; grew < want {
		t.Errorf("Footprint grew by %d with %d blocks of %d bytes every other freed, want at least %d: the holes are still held", grew, n, size, want)
	}
}

func testMalloc(t *testing.T) {
	for _, size := range []int{1, 100, 4096, 1 << 20} {
		p, err := libc.Malloc(size)
		if err != nil || p == nil {
			t.Fatalf("Malloc(%d) = %v, %v, want a block", size, p, err)
		}
		if u := libc.UsableSize(p); u < size {
			t.Errorf("UsableSize(Malloc(%d)) = %d, want >= %d", size, u, size)
		}
		clear(bytesOf(p, size)) // the whole block is writable
		libc.Free(p)
	}
	p, err := libc.Malloc(0)
	if err != nil {
		t.Errorf("Malloc(0) error: %v", err)
	}
	libc.Free(p)
	if _, err := libc.Malloc(-1); !errors.Is(err, libc.ErrInvalid) {
		t.Errorf("Malloc(-1) error = %v, want ErrInvalid", err)
	}
	if _, err := libc.Malloc(1 << 62); !errors.Is(err, libc.ErrNoMemory) {
		t.Errorf("Malloc(1<<62) error = %v, want ErrNoMemory", err)
	}
	libc.Free(nil)
	if n := libc.UsableSize(nil); n != 0 {
		t.Errorf("UsableSize(nil) = %d, want 0", n)
	}
}

// Ops, in the shape of the C calls they make.
func malloc(slot uint32, size uint64) libc.Op {
	return libc.Op{Kind: libc.OpMalloc, Slot: slot, Size: size}
}
func calloc(slot uint32, size uint64) libc.Op {
	return libc.Op{Kind: libc.OpCalloc, Slot: slot, Size: size}
}
func memalign(slot uint32, size uint64, align uint32) libc.Op {
	return libc.Op{Kind: libc.OpMemalign, Slot: slot, Size: size, Align: align}
}
func realloc(slot uint32, size uint64) libc.Op {
	return libc.Op{Kind: libc.OpRealloc, Slot: slot, Size: size}
}
func free(slot uint32) libc.Op { return libc.Op{Kind: libc.OpFree, Slot: slot} }

// block returns the block of slot, failing the test if it holds none.
func block(t *testing.T, l *libc.Loop, slot uint32) []byte {
	t.Helper()
	p, n, ok := l.Block(slot)
	if !ok {
		t.Fatalf("Block(%d) holds no block", slot)
	}
	return bytesOf(p, n)
}

// all reports whether every byte of b is c.
func all(b []byte, c byte) bool {
	for _, x := range b {
		if x != c {
			return false
		}
	}
	return true
}

// dirty leaves freed blocks full of 0xFF in the allocator, so that a
// calloc reusing one must clear it.
func dirty(t *testing.T) {
	for _, size := range []int{4096, 100000} {
		p, err := libc.Malloc(size)
		if err != nil {
			t.Fatal(err)
		}
		b := bytesOf(p, size)
		for i := range b {
			b[i] = 0xFF
		}
		libc.Free(p)
	}
}

var loopCases = []struct {
	name     string
	touch    bool
	setup    func(t *testing.T)
	ops      []libc.Op
	wantDone int   // ops Run completes; -1 for all
	wantErr  error // the error Run wraps, naming op wantDone
	check    func(t *testing.T, l *libc.Loop)
}{{
	name:     "malloc",
	ops:      []libc.Op{malloc(0, 100), malloc(1, 0), malloc(2, 1<<20)},
	wantDone: -1,
	check: func(t *testing.T, l *libc.Loop) {
		b := block(t, l, 0)
		if len(b) != 100 || libc.UsableSize(unsafe.Pointer(&b[0])) < 100 {
			t.Errorf("Block(0) = %d bytes, usable %d, want 100, >= 100", len(b), libc.UsableSize(unsafe.Pointer(&b[0])))
		}
		if b[0] != 0xA5 {
			t.Errorf("Block(0)[0] = %#x, want 0xa5 (the first byte is written)", b[0])
		}
		if _, n, ok := l.Block(1); ok && n != 0 {
			t.Errorf("Block(1) = %d bytes, want 0 (malloc(0))", n)
		}
		if b := block(t, l, 2); len(b) != 1<<20 {
			t.Errorf("Block(2) = %d bytes, want %d", len(b), 1<<20)
		}
		if _, _, ok := l.Block(3); ok {
			t.Errorf("Block(3) holds a block, want none")
		}
		if l.Elapsed() <= 0 {
			t.Errorf("Elapsed() = %v, want > 0", l.Elapsed())
		}
	},
}, {
	name:     "touch",
	touch:    true,
	ops:      []libc.Op{malloc(0, 5000), memalign(1, 3000, 64), realloc(2, 700)},
	wantDone: -1,
	check: func(t *testing.T, l *libc.Loop) {
		for slot := range uint32(3) {
			if b := block(t, l, slot); !all(b, 0xA5) {
				t.Errorf("Block(%d) is not all 0xa5 after a touching loop", slot)
			}
		}
	},
}, {
	name:     "calloc",
	setup:    dirty,
	ops:      []libc.Op{calloc(0, 4096), calloc(1, 100000), calloc(2, 0)},
	wantDone: -1,
	check: func(t *testing.T, l *libc.Loop) {
		for slot := range uint32(2) {
			if b := block(t, l, slot); !all(b, 0) {
				t.Errorf("Block(%d) of calloc does not read zero", slot)
			}
		}
	},
}, {
	name:     "calloc touch",
	touch:    true,
	setup:    dirty,
	ops:      []libc.Op{calloc(0, 4096), calloc(1, 100000)},
	wantDone: -1,
	check: func(t *testing.T, l *libc.Loop) {
		for slot := range uint32(2) {
			if b := block(t, l, slot); !all(b, 0) {
				t.Errorf("Block(%d) of calloc does not read zero", slot)
			}
		}
	},
}, {
	name: "memalign",
	ops: []libc.Op{memalign(0, 100, 4096), memalign(1, 1, 64), memalign(2, 10, 1),
		memalign(3, 10, 0), memalign(4, 5000, 1<<16), memalign(5, 0, 32)},
	wantDone: -1,
	check: func(t *testing.T, l *libc.Loop) {
		for slot, align := range []uintptr{4096, 64, 8, 8, 1 << 16} {
			p, _, ok := l.Block(uint32(slot))
			if !ok || uintptr(p)%align != 0 {
				t.Errorf("Block(%d) = %p, want a multiple of %d", slot, p, align)
			}
		}
	},
}, {
	name:     "memalign not a power of two",
	ops:      []libc.Op{malloc(0, 8), memalign(1, 8, 48), malloc(2, 8)},
	wantDone: 1,
	wantErr:  libc.ErrInvalid,
}, {
	name:     "realloc keeps contents",
	touch:    true,
	ops:      []libc.Op{malloc(0, 16)},
	wantDone: -1,
	check: func(t *testing.T, l *libc.Loop) {
		b := block(t, l, 0)
		for i := range b {
			b[i] = byte(i + 1)
		}
		for _, size := range []uint64{1 << 20, 8, 0} {
			if _, err := l.Run([]libc.Op{realloc(0, size)}); err != nil {
				t.Fatalf("realloc(0, %d): %v", size, err)
			}
			p, n, ok := l.Block(0)
			if !ok {
				if size == 0 {
					continue // realloc(p, 0) freed it
				}
				t.Fatalf("Block(0) holds no block after realloc(0, %d)", size)
			}
			b := bytesOf(p, n)
			for i := range min(n, 16) {
				if b[i] != byte(i+1) {
					t.Fatalf("after realloc(0, %d), byte %d = %d, want %d", size, i, b[i], i+1)
				}
			}
			if n > 16 && !all(b[16:], 0xA5) {
				t.Errorf("after realloc(0, %d), the grown tail is not all 0xa5", size)
			}
		}
	},
}, {
	name:     "realloc of an empty slot",
	ops:      []libc.Op{realloc(5, 100)},
	wantDone: -1,
	check: func(t *testing.T, l *libc.Loop) {
		if b := block(t, l, 5); len(b) != 100 {
			t.Errorf("Block(5) = %d bytes, want 100", len(b))
		}
	},
}, {
	name:     "free",
	ops:      []libc.Op{malloc(0, 10), malloc(1, 10), free(0), free(7), free(1 << 30)},
	wantDone: -1,
	check: func(t *testing.T, l *libc.Loop) {
		if _, _, ok := l.Block(0); ok {
			t.Errorf("Block(0) holds a block after free(0)")
		}
		block(t, l, 1)
	},
}, {
	name:     "slot in use",
	ops:      []libc.Op{malloc(0, 10), calloc(0, 20)},
	wantDone: 1,
	wantErr:  libc.ErrInvalid,
	check: func(t *testing.T, l *libc.Loop) {
		if b := block(t, l, 0); len(b) != 10 {
			t.Errorf("Block(0) = %d bytes, want the first block's 10", len(b))
		}
	},
}, {
	name:     "unknown kind",
	ops:      []libc.Op{malloc(0, 10), {Kind: 0, Slot: 1}, {Kind: 6, Slot: 1}},
	wantDone: 1,
	wantErr:  libc.ErrInvalid,
}, {
	name:     "table grows",
	ops:      []libc.Op{malloc(0, 1), malloc(100000, 2), malloc(1<<20, 3), free(100000)},
	wantDone: -1,
	check: func(t *testing.T, l *libc.Loop) {
		if b := block(t, l, 1<<20); len(b) != 3 {
			t.Errorf("Block(1<<20) = %d bytes, want 3", len(b))
		}
		if got, want := l.TableBytes(), int64(1<<20+1)*16; got < want {
			t.Errorf("TableBytes() = %d, want >= %d", got, want)
		}
	},
}, {
	name:     "malloc returns NULL",
	ops:      []libc.Op{malloc(0, 10), malloc(1, 1<<62), malloc(2, 10)},
	wantDone: 1,
	wantErr:  libc.ErrNoMemory,
	check: func(t *testing.T, l *libc.Loop) {
		if _, _, ok := l.Block(1); ok {
			t.Errorf("Block(1) holds a block after a failed malloc")
		}
		// The loop stays usable: go on after the failed op.
		if done, err := l.Run([]libc.Op{malloc(2, 10), free(0)}); done != 2 || err != nil {
			t.Errorf("Run after the failure = %d, %v, want 2, nil", done, err)
		}
		block(t, l, 2)
	},
}, {
	name:     "realloc returns NULL",
	ops:      []libc.Op{malloc(0, 10), realloc(0, 1<<62)},
	wantDone: 1,
	wantErr:  libc.ErrNoMemory,
	check: func(t *testing.T, l *libc.Loop) {
		if b := block(t, l, 0); len(b) != 10 {
			t.Errorf("Block(0) = %d bytes after a failed realloc, want the old 10", len(b))
		}
	},
}, {
	name:     "memalign returns NULL",
	ops:      []libc.Op{memalign(0, 1<<62, 64)},
	wantDone: 0,
	wantErr:  libc.ErrNoMemory,
}}

func testLoop(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, tc := range loopCases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup(t)
			}
			l, err := libc.NewLoop(tc.touch)
			if err != nil {
				t.Fatalf("NewLoop(%v) error: %v", tc.touch, err)
			}
			defer l.Close()
			want := tc.wantDone
			if want < 0 {
				want = len(tc.ops)
			}
			done, err := l.Run(tc.ops)
			if done != want || !errors.Is(err, tc.wantErr) {
				t.Fatalf("Run = %d, %v, want %d, %v", done, err, want, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("op %d:", want)) {
				t.Errorf("Run error %q does not name op %d", err, want)
			}
			if tc.check != nil {
				tc.check(t, l)
			}
			l.Close()
			if _, _, ok := l.Block(0); ok {
				t.Errorf("Block(0) after Close holds a block")
			}
			if _, err := l.Run(tc.ops); !errors.Is(err, libc.ErrClosed) {
				t.Errorf("Run after Close error = %v, want ErrClosed", err)
			}
		})
	}
}

func TestLoopAllocs(t *testing.T) {
	needC(t)
	l, err := libc.NewLoop(false)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ops := []libc.Op{malloc(0, 64), realloc(0, 128), free(0)}
	if n := testing.AllocsPerRun(100, func() { l.Run(ops) }); n != 0 {
		t.Errorf("Run allocates %v times per call, want 0", n)
	}
}

// testLoopCloseFrees fills a loop with blocks too large for any thread
// cache and checks that the allocator counts them freed after Close.
func testLoopCloseFrees(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const n, size = 64, 256 << 10
	l, err := libc.NewLoop(false)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ops := make([]libc.Op, n)
	for i := range ops {
		ops[i] = malloc(uint32(i), size)
	}
	if _, err := l.Run(ops); err != nil {
		t.Fatal(err)
	}
	full, err := libc.Stats()
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	empty, err := libc.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if freed, want := full.Allocated-empty.Allocated, int64(n*size-64<<10); freed < want {
		t.Errorf("Allocated fell by %d after Close of %d blocks of %d bytes, want at least %d", freed, n, size, want)
	}
}

// The preload test: the test binary runs itself with LD_PRELOAD naming
// each library, and the child (TestHelperProcess) reports which malloc
// serves it and runs the tests above on it.

const helperEnv = "CARVE_LIBC_HELPER"

// helperMark starts the child's report line.
const helperMark = "carve-libc-helper:"

func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("the child of TestPreload")
	}
	id := libc.Active()
	os.Stdout.WriteString(helperMark + id.Name + "\t" + id.Version + "\t" + id.Library + "\n")
	if !libc.Available() {
		return
	}
	t.Run("Stats", testStats)
	t.Run("Malloc", testMalloc)
	t.Run("Loop", testLoop)
	t.Run("LoopCloseFrees", testLoopCloseFrees)
}

// preloads names each allocator's library files, in order of preference.
var preloads = []struct{ name, files string }{
	{"jemalloc", "libjemalloc.so.2"},
	{"tcmalloc", "libtcmalloc_minimal.so.4 libtcmalloc.so.4"},
	{"mimalloc", "libmimalloc.so.2 libmimalloc.so.3"},
}

// findLibrary returns the path of the first of files found in the
// system's library directories, or "".
func findLibrary(files string) string {
	triplet := map[string]string{
		"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu", "386": "i386-linux-gnu",
		"riscv64": "riscv64-linux-gnu", "ppc64le": "powerpc64le-linux-gnu", "s390x": "s390x-linux-gnu",
	}[runtime.GOARCH]
	dirs := []string{"/usr/lib/" + triplet, "/lib/" + triplet, "/usr/lib64", "/usr/lib", "/usr/local/lib"}
	for _, f := range strings.Fields(files) {
		for _, d := range dirs {
			if p := filepath.Join(d, f); fileExists(p) {
				return p
			}
		}
	}
	return ""
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

func TestPreload(t *testing.T) {
	needC(t)
	if runtime.GOOS != "linux" {
		t.Skip("LD_PRELOAD is the Linux loader's")
	}
	for _, p := range preloads {
		t.Run(p.name, func(t *testing.T) {
			path := findLibrary(p.files)
			if path == "" {
				if os.Getenv("CI") == "true" {
					t.Fatalf("%s not installed (%s), and CI=true: CI must install it", p.name, p.files)
				}
				t.Skipf("%s not installed (%s)", p.name, p.files)
			}
			id := runHelper(t, path)
			if id.Name != p.name || id.Version == "" || id.Library != path {
				t.Errorf("LD_PRELOAD=%s: child runs %+v, want %s from %s", path, id, p.name, path)
			}
		})
	}
	// The trap: a library the loader cannot find is ignored, silently to
	// the program, which runs on glibc. Active must say so.
	t.Run("missing", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "libcarve-no-such-malloc.so")
		if id := runHelper(t, path); id.Name != "glibc" {
			t.Errorf("LD_PRELOAD=%s (missing): child runs %+v, want glibc", path, id)
		}
	})
}

// runHelper runs TestHelperProcess in a child with LD_PRELOAD=preload and
// returns the Identity it reports. A child test that fails fails t.
func runHelper(t *testing.T, preload string) libc.Identity {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.v")
	cmd.Env = append(withoutPreload(os.Environ()), helperEnv+"=1", "LD_PRELOAD="+preload)
	if os.Getenv("GORACE") == "" {
		// A race-enabled child would sleep a second before exiting.
		cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=0")
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child with LD_PRELOAD=%s: %v\n%s%s", preload, err, out, stderr.String())
	}
	for line := range strings.Lines(string(out)) {
		if rest, ok := strings.CutPrefix(line, helperMark); ok {
			f := strings.Split(strings.TrimSuffix(rest, "\n"), "\t")
			if len(f) == 3 {
				t.Logf("LD_PRELOAD=%s: %s %s from %s", preload, f[0], f[1], f[2])
				return libc.Identity{Name: f[0], Version: f[1], Library: f[2]}
			}
		}
	}
	t.Fatalf("child with LD_PRELOAD=%s reported nothing:\n%s%s", preload, out, stderr.String())
	return libc.Identity{}
}

func withoutPreload(env []string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, "LD_PRELOAD=") && !strings.HasPrefix(e, helperEnv+"=") {
			out = append(out, e)
		}
	}
	return out
}
