package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// chromium returns the path of a headless-capable Chromium, or "".
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// runChromium runs headless Chromium on a file with args, and returns its
// standard output and its log (standard error).
func runChromium(t *testing.T, browser, page string, args ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := []string{
		"--headless", "--no-sandbox", // root in CI needs --no-sandbox
		"--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=1",
	}
	cmd := exec.CommandContext(ctx, browser, append(append(base, args...), "file://"+page)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	return stdout.String(), stderr.String()
}

var (
	figureRE  = regexp.MustCompile(`(?s)<figure>.*?</figure>`)
	consoleRE = regexp.MustCompile(`(?m)^.*:CONSOLE[:(].*$`)
	labelsRE  = regexp.MustCompile(`(?s)<table class="labels">.*?</table>`)
)

// TestReportInChromium renders reports, opens each in headless Chromium,
// and checks that the page logs nothing to the console (an SVG attribute
// Chromium cannot parse is logged there), that every figure holds a chart
// that draws something, that the verdicts and the sources close the
// report, and what each report must show: the shipped trace's (the one
// docs/report.png shows: the headline's zoomed chart), a Go trace's (the
// table of its types, the program's own heap beside the replays), a
// scenario's (its phases marked). It saves a screenshot of each (their
// paths are logged; CARVE_SCREENSHOT names the first's).
func TestReportInChromium(t *testing.T) {
	browser := chromium()
	if browser == "" {
		needReal(t, "chromium", "not installed (apt-get install chromium)")
	}
	for i, tc := range []struct {
		name    string
		args    []string
		figures int      // at least
		want    []string // in the rendered page
	}{
		{
			name: "shipped",
			args: []string{"--alloc", "first-fit,best-fit,buddy,sizeclass,go,glibc,jemalloc", "aosp-systemui", "gen:carving:n=2000"},
			// per trace: fragmentation, ratio, resident, footprint,
			// sizes, lifetimes; the maps
			figures: 12,
			want:    []string{"Peak RSS / peak live so far, zoomed: aosp-systemui", "peak RSS / live (headline)"},
		},
		{
			name:    "go",
			args:    []string{"--alloc", "first-fit,go,glibc", filepath.Join("..", "..", "lab", "trace", "testdata", "labelled", "go.trace")},
			figures: 6,
			want:    []string{"Types (labels) by bytes live at the peak", "<title>program's heap</title>", "<title>its heap goal</title>"},
		},
		{
			name:    "scenario",
			args:    []string{"--alloc", "first-fit,best-fit,glibc", "--pool", "1024", "gen:connection:n=2000,next=4096"},
			figures: 6,
			want:    []string{">setup</text>", ">scratch freed</text>", ">next buffers</text>", "first-fit+pool(1024)", "the last phase (next buffers)"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			page := filepath.Join(dir, "report.html")
			var stdout, stderr bytes.Buffer
			args := append([]string{"report", "-o", page}, tc.args...)
			if code := run(args, &stdout, &stderr); code != 0 {
				t.Fatalf("carve %q = %d: %s", args, code, stderr.String())
			}
			fi, err := os.Stat(page)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() > 5<<20 {
				t.Errorf("report is %d bytes, want under 5 MB", fi.Size())
			}

			dom, log := runChromium(t, browser, page, "--dump-dom")
			if lines := consoleRE.FindAllString(log, -1); len(lines) > 0 {
				t.Errorf("the page logged to the console:\n%s", strings.Join(lines, "\n"))
			}
			figs := figureRE.FindAllString(dom, -1)
			if len(figs) < tc.figures {
				t.Errorf("%d figures in the rendered page, want at least %d", len(figs), tc.figures)
			}
			for i, f := range figs {
				if !strings.Contains(f, "<svg") || !strings.Contains(f, "<path") && !strings.Contains(f, "<rect x=") {
					t.Errorf("figure %d has no chart that draws:\n%.300s", i, f)
				}
			}
			for _, want := range append(tc.want, "Verdict", "lowest peak RSS / peak live", `<h2 id="summary">Summary</h2>`,
				`"Are Mallocs Free of Fragmentation?"`, `"The Memory Fragmentation Problem: Solved?"`, `"Block Allocators and Memory Fragmentation"`) {
				if !strings.Contains(dom, want) {
					t.Errorf("the rendered page lacks %q", want)
				}
			}
			if tc.name == "go" {
				types := labelsRE.FindString(dom)
				for _, want := range []string{"main.session", "main.conn", "(no label)", "more labels)"} {
					if !strings.Contains(types, want) {
						t.Errorf("the table of types lacks %q:\n%.500s", want, types)
					}
				}
			} else if labelsRE.MatchString(dom) {
				t.Error("a table of types for a trace without labels")
			}

			shot := filepath.Join(os.TempDir(), "carve-report-"+tc.name+".png")
			if env := os.Getenv("CARVE_SCREENSHOT"); env != "" && i == 0 {
				shot = env
			}
			runChromium(t, browser, page, "--window-size=1000,2400", "--screenshot="+shot)
			if fi, err := os.Stat(shot); err != nil || fi.Size() < 10000 {
				t.Errorf("screenshot %s: %v", shot, err)
			}
			t.Logf("report %d KiB, %d figures; screenshot in %s", fi.Size()>>10, len(figs), shot)
		})
	}
}

// BenchmarkReport makes the report of a 2.5-million-event trace (Zipf
// sizes from 8 B to 64 KiB with a spike, 1,250,000 allocations, each
// freed) through every allocator: the whole command, replays and
// summary and HTML, as a user runs it. Reports the file's size.
//
//	go test -run '^$' -bench Report -benchtime 1x ./cmd/carve
func BenchmarkReport(b *testing.B) {
	page := filepath.Join(b.TempDir(), "report.html")
	args := []string{"report", "-o", page, "gen:zipf:n=1250000"}
	for b.Loop() {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 0 {
			b.Fatalf("carve %q = %d: %s", args, code, stderr.String())
		}
	}
	fi, err := os.Stat(page)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(fi.Size())/1e6, "MB")
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/report")
}

// TestReportMapAt draws first fit's map after the connection scenario's
// scratch buffers are freed: the article's holes, one per connection, each
// next to a live session; and, zoomed, a window of them at cells of 32 B,
// the largest at which each 80-byte session (with its header) spans two.
func TestReportMapAt(t *testing.T) {
	page := filepath.Join(t.TempDir(), "r.html")
	var stdout, stderr bytes.Buffer
	args := []string{"report", "-o", page, "--map-at", "6000", "--alloc", "first-fit", "gen:connection:n=2000,next=4096"}
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("carve %q = %d: %s", args, code, stderr.String())
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"first-fit at the chosen moment (event 6000)", "2000 holes, the largest 1.0 KiB", "first-fit, zoomed: ", "one cell = 32 B"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if code := run([]string{"report", "--map-at", "-1", "gen:bump:n=10"}, &stdout, &stderr); code != 2 {
		t.Errorf("--map-at -1: exit %d, want 2", code)
	}
}

// TestReportAdvise: carve report --advise adds, for a Go program's
// trace, the advisor's result as carve advise prints it, and nothing for
// a trace of no types.
func TestReportAdvise(t *testing.T) {
	page := filepath.Join(t.TempDir(), "r.html")
	var stdout, stderr bytes.Buffer
	args := []string{"report", "-o", page, "--advise", "--alloc", "go,first-fit", goTrace, "gen:connection:n=200"}
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("carve %q = %d: %s", args, code, stderr.String())
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(html), "Types to move off the Go heap (carve advise)"); n != 1 {
		t.Errorf("%d advice sections, want one, for the Go trace", n)
	}
	for _, want := range []string{"carve advise: " + goTrace, "a move is suggested with", "types tried: pointer-free"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if !strings.Contains(stderr.String(), "replays of the whole trace") {
		t.Errorf("the advisor did not say its replays: %s", stderr.String())
	}
}

// TestReportOffersNoHTML: --html is carve replay's (it writes the report
// beside the table); carve report writes the report itself and does not
// take it, nor list it in its help.
func TestReportOffersNoHTML(t *testing.T) {
	page := filepath.Join(t.TempDir(), "r.html")
	var stdout, stderr bytes.Buffer
	args := []string{"report", "-o", page, "--html", filepath.Join(t.TempDir(), "x.html"), "gen:bump:n=10"}
	if code := run(args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "-html") {
		t.Errorf("carve %q = %d, %q; want 2, naming --html", args, code, stderr.String())
	}
	if _, err := os.Stat(page); err == nil {
		t.Errorf("carve %q wrote %s", args, page)
	}
	for _, tc := range []struct {
		cmd  string
		html bool
	}{{"report", false}, {"lab", false}, {"replay", true}} {
		stdout.Reset()
		if code := run([]string{"help", tc.cmd}, &stdout, &stdout); code != 0 {
			t.Fatalf("carve help %s = %d", tc.cmd, code)
		}
		if got := strings.Contains(stdout.String(), "  --html "); got != tc.html {
			t.Errorf("carve help %s lists --html: %t, want %t", tc.cmd, got, tc.html)
		}
	}
}
