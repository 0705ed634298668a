package libc_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/carvelab/carve/lab/libc"
)

// needReplayer skips a test of the C replayer where it cannot run (off
// Linux, or without a C compiler), and fails it instead under CI=true.
func needReplayer(t *testing.T) {
	t.Helper()
	if err := libc.ReplayerAvailable(); err != nil {
		if os.Getenv("CI") == "true" && errors.Is(err, libc.ErrNoCompiler) {
			t.Fatalf("%v, and CI=true: CI must install a C compiler", err)
		}
		t.Skip(err)
	}
}

func startReplayer(t *testing.T, preload string, touch bool) *libc.Replayer {
	t.Helper()
	r, err := libc.StartReplayer(preload, touch)
	if err != nil {
		t.Fatalf("StartReplayer(%q, %v) error: %v", preload, touch, err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestReplayer(t *testing.T) {
	needReplayer(t)
	r := startReplayer(t, "", true)
	if id := r.Identity(); id.Name != "glibc" || !strings.HasPrefix(id.Version, "2.") || !strings.Contains(id.Library, "libc.so") {
		t.Errorf("Identity() = %+v, want glibc 2.x from libc.so", id)
	}
	start := r.Startup()
	if start.HeapErr != nil || start.Heap.Source != "mallinfo2" || start.Heap.Footprint <= 0 {
		t.Errorf("Startup() = %+v, want glibc's mallinfo2 figure", start)
	}
	if start.AnonRSS <= 0 || start.RSS < start.AnonRSS {
		t.Errorf("Startup() = %+v, want RSS >= AnonRSS > 0", start)
	}
	t.Logf("start-up: %+v", start)

	// 64 blocks of 1 MiB, every byte written: 64 MiB more resident.
	const n, size = 64, 1 << 20
	var ops []libc.Op
	for i := range n {
		ops = append(ops, malloc(uint32(i), size))
	}
	rep, err := r.Run(ops)
	if err != nil || rep.Done != n {
		t.Fatalf("Run(%d mallocs) = %+v, %v", n, rep, err)
	}
	if res := rep.Resident(start); res < n*size || res > n*size+4<<20 {
		t.Errorf("Resident after %d touched blocks of %d bytes = %d, want %d to %d", n, size, res, n*size, n*size+4<<20)
	}
	if fp := rep.Heap.Footprint - start.Heap.Footprint; fp < n*size {
		t.Errorf("footprint grew by %d, want >= %d", fp, n*size)
	}
	if rep.Nanos <= 0 || rep.TableBytes <= 0 {
		t.Errorf("Run: Nanos %d, TableBytes %d, want both > 0", rep.Nanos, rep.TableBytes)
	}

	// glibc gives blocks of 1 MiB (mmap'd chunks) back at once: the
	// resident memory falls, and the high-water mark keeps the peak.
	ops = ops[:0]
	for i := range n {
		ops = append(ops, free(uint32(i)))
	}
	ops = append(ops, malloc(0, 100))
	rep, err = r.Run(ops)
	if err != nil {
		t.Fatal(err)
	}
	// The mark counts file-backed pages too, which the kernel may have
	// reclaimed since the baseline: it holds at least the baseline's
	// anonymous pages and the blocks.
	if rep.AnonRSS-start.AnonRSS > 4<<20 || rep.PeakRSS-start.AnonRSS < n*size {
		t.Errorf("after the frees: anonymous RSS %d above the baseline, peak %d above its anonymous RSS, want under 4 MiB and at least %d", rep.AnonRSS-start.AnonRSS, rep.PeakRSS-start.AnonRSS, n*size)
	}
	// The next report's mark starts again from the current RSS.
	rep, err = r.Run(nil)
	if err != nil || rep.Done != 0 {
		t.Fatalf("Run(nil) = %+v, %v", rep, err)
	}
	if res := rep.Resident(start); res > 4<<20 {
		t.Errorf("Resident after the frees = %d, want under 4 MiB", res)
	}
}

// TestReplayerFailures: a failed op names its index within Run's ops,
// across the pieces of 4096 Run sends, and the replayer stays usable; one
// that died says so.
func TestReplayerFailures(t *testing.T) {
	needReplayer(t)
	r := startReplayer(t, "", false)
	ops := make([]libc.Op, 5000)
	for i := range ops {
		ops[i] = malloc(uint32(i), 16)
	}
	ops[4500] = malloc(4500, 1<<62)
	rep, err := r.Run(ops)
	if rep.Done != 4500 || !errors.Is(err, libc.ErrNoMemory) || !strings.Contains(err.Error(), "op 4500:") {
		t.Fatalf("Run = %d done, %v, want 4500, ErrNoMemory at op 4500", rep.Done, err)
	}
	if rep, err := r.Run([]libc.Op{memalign(6000, 8, 48)}); rep.Done != 0 || !errors.Is(err, libc.ErrInvalid) {
		t.Errorf("Run(memalign 48) = %+v, %v, want ErrInvalid", rep, err)
	}
	if rep, err := r.Run([]libc.Op{malloc(4500, 8), free(0), free(1 << 20)}); rep.Done != 3 || err != nil {
		t.Errorf("Run after the failures = %+v, %v, want 3 done", rep, err)
	}

	p, err := os.FindProcess(r.Pid())
	if err != nil {
		t.Fatal(err)
	}
	p.Signal(syscall.SIGKILL)
	if _, err := r.Run([]libc.Op{malloc(0, 8)}); !errors.Is(err, libc.ErrClosed) || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Run after the replayer was killed: %v, want ErrClosed saying it was killed", err)
	}
	if _, err := r.Run(nil); !errors.Is(err, libc.ErrClosed) {
		t.Errorf("Run again: %v, want ErrClosed", err)
	}
}

// TestReplayerPreload starts the replayer with each library preloaded:
// it names the malloc that serves it, and glibc when the library is
// missing.
func TestReplayerPreload(t *testing.T) {
	needReplayer(t)
	for _, p := range preloads {
		t.Run(p.name, func(t *testing.T) {
			path := findLibrary(p.files)
			if path == "" {
				if os.Getenv("CI") == "true" {
					t.Fatalf("%s not installed (%s), and CI=true: CI must install it", p.name, p.files)
				}
				t.Skipf("%s not installed (%s)", p.name, p.files)
			}
			r := startReplayer(t, path, true)
			if id := r.Identity(); id.Name != p.name || id.Version == "" || id.Library != path {
				t.Errorf("LD_PRELOAD=%s: the replayer runs %+v, want %s from %s", path, id, p.name, path)
			}
			start := r.Startup()
			if start.HeapErr != nil || start.Heap.Source != sources[p.name] {
				t.Errorf("Startup() = %+v, want %s's figure", start, sources[p.name])
			}
			rep, err := r.Run([]libc.Op{malloc(0, 8<<20), calloc(1, 1<<20), realloc(0, 16<<20)})
			if err != nil {
				t.Fatal(err)
			}
			if res := rep.Resident(start); res < 17<<20 {
				t.Errorf("Resident after 17 MiB of touched blocks = %d", res)
			}
			t.Logf("%s %s: start-up %+v; after 17 MiB: heap %+v, resident %d", p.name, r.Identity().Version, start, rep.Heap, rep.Resident(start))
		})
	}
	t.Run("missing", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "libcarve-no-such-malloc.so")
		if id := startReplayer(t, path, false).Identity(); id.Name != "glibc" {
			t.Errorf("LD_PRELOAD=%s (missing): the replayer runs %+v, want glibc", path, id)
		}
	})
}
