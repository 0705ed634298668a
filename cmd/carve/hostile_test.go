package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// hostileCase is a file of the adversarial corpus and what carve must do
// with it.
type hostileCase struct {
	file                   string
	replay, stats, convert int    // exit codes
	want                   string // a part of carve's standard error, or of the replay's output
	args                   []string
}

// hostile is the adversarial corpus: small files in testdata/hostile,
// each with the exit codes carve must give replaying it, describing it and
// converting it (0 ok, 1 a failed check, 2 unreadable input), and what its
// messages must say.
var hostile = []hostileCase{
	{file: "align-not-power.txt"},
	{file: "aosp-thread-overflows.txt", replay: 2, stats: 2, convert: 2, want: "does not fit in 32 bits"},
	{file: "binary.bin", replay: 2, stats: 2, convert: 2, want: "cannot detect the trace format"},
	{file: "calloc-odd.txt"},
	{file: "empty.txt", replay: 2, stats: 2, convert: 2, want: "the file is empty"},
	{file: "header-only.txt"},
	{file: "ids-huge.txt"},
	{file: "native-no-header.txt", replay: 2, stats: 2, convert: 2, want: "its header, the first line, is missing"},
	{file: "op-unknown.txt", replay: 2, stats: 2, convert: 2, want: "op-unknown.txt:3:"},
	{file: "rep-two-numbers-truncated.rep", replay: 2, stats: 2, convert: 2, want: "rep-two-numbers-truncated.rep"},
	{file: "request-16gib.txt", want: "above the replay's budget of 256.00 MiB"},
	// The default budget (half the physical memory, at most 64 GiB) refuses
	// a terabyte.
	{file: "request-1tib.txt", want: "a request of 1.00 TiB, above the replay's budget", args: []string{}},
	{file: "size-negative.txt", replay: 2, stats: 2, convert: 2, want: "size-negative.txt:2:"},
	{file: "size-overflows.txt", replay: 2, stats: 2, convert: 2, want: "does not fit in 64 bits"},
	{file: "sizes-sum-overflows.txt"},
	{file: "trace-errors.txt"},
	{file: "trace-errors.txt", replay: 1, want: "trace-errors.txt:3:", args: []string{"--strict"}},
	{file: "valgrind-huge.log"},
}

// carveProcess runs carve's command line in a process of its own (this
// test binary, told to be carve) and returns its exit code, its output,
// and the most resident memory it or any process it waited for took.
func carveProcess(t *testing.T, args ...string) (code int, stdout, stderr string, rss int64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asCarve+"=1")
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	err := cmd.Run()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("carve %q: %v", args, err)
		}
	}
	return cmd.ProcessState.ExitCode(), out.String(), errs.String(), maxRSS(cmd.ProcessState)
}

// panicRE finds the marks of a Go panic or a runtime crash.
var panicRE = regexp.MustCompile(`(?m)^(panic: |fatal error: |goroutine \d+ \[|SIGSEGV|runtime error)`)

// TestHostileCorpus sends every file of the corpus, and the large cases
// the test makes (decompression bombs, truncated and corrupt compressed
// traces, a heaptrack file of allocation records and nothing else),
// through carve replay (carve's best fit, glibc and the Go heap, with a
// budget of 256 MiB a request), carve stats and carve convert, each in a
// process of its own: the exit code is the documented one, nothing
// panics, errors name the file (and its line where there is one), and no
// process goes above 1 GiB of resident memory. CARVE_LONG=1 sends them
// through every row and every command.
func TestHostileCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a few hundred processes")
	}
	dir := t.TempDir()
	files := append([]hostileCase{}, hostile...)
	for i := range files {
		files[i].file = filepath.Join("testdata", "hostile", files[i].file)
	}
	files = append(files, generatedHostile(t, dir)...)
	rows := "best-fit,glibc,go"
	if os.Getenv("CARVE_LONG") == "1" {
		rows = "all"
	}
	limit := int64(1 << 30)
	if raceEnabled {
		limit = 8 << 30 // the race detector's shadow memory
	}
	for _, f := range files {
		name := filepath.Base(f.file) + strings.Join(f.args, "")
		t.Run(name, func(t *testing.T) {
			budget := []string{"--max-request", "256MiB"}
			if f.args != nil {
				budget = f.args
			}
			runs := []struct {
				args []string
				code int
			}{
				{append(append([]string{"replay", "--alloc", rows}, budget...), f.file), f.replay},
				{[]string{"stats", f.file}, f.stats},
				{[]string{"convert", "-o", filepath.Join(t.TempDir(), "out.trace"), f.file}, f.convert},
			}
			if len(f.args) > 0 {
				runs = runs[:1] // the flags are replay's
			}
			if os.Getenv("CARVE_LONG") == "1" && f.args == nil {
				runs = append(runs,
					struct {
						args []string
						code int
					}{[]string{"report", "-o", filepath.Join(t.TempDir(), "r.html"), "--max-request", "256MiB", f.file}, f.replay},
					struct {
						args []string
						code int
					}{[]string{"advise", "--max-request", "256MiB", f.file}, min(f.replay, 2)})
			}
			for _, r := range runs {
				code, stdout, stderr, rss := carveProcess(t, r.args...)
				all := stdout + stderr
				switch {
				case code != r.code:
					t.Errorf("carve %q: exit %d, want %d:\n%s", r.args, code, r.code, all)
				case panicRE.MatchString(all):
					t.Errorf("carve %q panicked:\n%s", r.args, all)
				case rss > limit:
					t.Errorf("carve %q: %d MiB resident, want at most %d", r.args, rss>>20, limit>>20)
				case code == 2 && !strings.Contains(stderr, filepath.Base(f.file)):
					t.Errorf("carve %q: the error does not name the file:\n%s", r.args, stderr)
				case f.want != "" && r.args[0] == "replay" && !strings.Contains(all, f.want):
					t.Errorf("carve %q: %q lacks %q", r.args, all, f.want)
				}
			}
		})
	}
}

// generatedHostile writes the corpus's large cases into dir.
func generatedHostile(t *testing.T, dir string) []hostileCase {
	t.Helper()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gz := func(data []byte, repeat int) []byte {
		var b bytes.Buffer
		w, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		for range repeat {
			w.Write(data)
		}
		w.Close()
		return b.Bytes()
	}
	zs := func(data []byte, repeat int) []byte {
		var b bytes.Buffer
		w, err := zstd.NewWriter(&b, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
		if err != nil {
			t.Fatal(err)
		}
		for range repeat {
			w.Write(data)
		}
		w.Close()
		return b.Bytes()
	}
	var trace bytes.Buffer
	trace.WriteString("# carve trace v1\n")
	for i := range 20000 {
		fmt.Fprintf(&trace, "a %d %d\nf %d\n", i+1, 16+i%512, i+1)
	}
	good := trace.Bytes()
	gzGood, zsGood := gz(good, 1), zs(good, 1)

	// heaptrack: allocation records ("a SIZE TRACE") and nothing else, a
	// few million of them in a file of kilobytes.
	var ht bytes.Buffer
	ht.WriteString("v 10400 3\nX ./prog\n")
	for i := range 1 << 12 {
		fmt.Fprintf(&ht, "a %x 1\n", i+1)
	}
	htRecords := ht.Bytes()[len("v 10400 3\nX ./prog\n"):]

	return []hostileCase{
		// A line without end: 64 MiB of one byte, compressed to kilobytes.
		{file: write("one-long-line.gz", gz(bytes.Repeat([]byte("a"), 1<<20), 64)), replay: 2, stats: 2, convert: 2, want: "one-long-line.gz"},
		// 256 MiB of zeros: no format.
		{file: write("zeros.zst", zs(make([]byte, 1<<20), 256)), replay: 2, stats: 2, convert: 2, want: "zeros.zst"},
		{file: write("truncated.gz", gzGood[:len(gzGood)/2]), replay: 2, stats: 2, convert: 2, want: "gzip"},
		{file: write("truncated.zst", zsGood[:len(zsGood)/2]), replay: 2, stats: 2, convert: 2, want: "zstd"},
		{file: write("corrupt.gz", corrupt(gzGood)), replay: 2, stats: 2, convert: 2, want: "corrupt.gz"},
		{file: write("corrupt.zst", corrupt(zsGood)), replay: 2, stats: 2, convert: 2, want: "zstd"},
		{file: write("good.zst", zsGood)},
		// A zstd frame that claims a window of 2 GiB.
		{file: write("window.zst", zstdHugeWindow()), replay: 2, stats: 2, convert: 2, want: "zstd"},
		{file: write("heaptrack-records.zst", zs(append([]byte("v 10400 3\nX ./prog\n"), bytes.Repeat(htRecords, 1<<11)...), 1)), replay: 2, stats: 2, convert: 2, want: "heaptrack-records.zst"},
	}
}

// corrupt flips bytes in the middle of a compressed file.
func corrupt(b []byte) []byte {
	c := bytes.Clone(b)
	for i := len(c) / 3; i < len(c)/3+16 && i < len(c); i++ {
		c[i] ^= 0x5A
	}
	return c
}

// zstdHugeWindow returns a zstd frame header that asks for a 2 GiB window,
// followed by a little data.
func zstdHugeWindow() []byte {
	// Magic, frame header descriptor (no checksum, single segment off, no
	// dictionary, no content size), window descriptor: exponent 21 (2^31).
	return append([]byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, 21 << 3}, bytes.Repeat([]byte{0}, 64)...)
}
