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
)

// TestReportInChromium renders the report of the shipped trace, opens it
// in headless Chromium, and checks that the page logs nothing to the
// console (an SVG attribute Chromium cannot parse is logged there), that
// every figure holds a chart that draws something, and saves a
// screenshot (its path is logged; CARVE_SCREENSHOT names another).
func TestReportInChromium(t *testing.T) {
	browser := chromium()
	if browser == "" {
		needReal(t, "chromium", "not installed (apt-get install chromium)")
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	var stdout, stderr bytes.Buffer
	args := []string{"report", "-o", page, "--alloc", "first-fit,best-fit,buddy,sizeclass,go,glibc,jemalloc", "aosp-systemui", "gen:carving:n=2000"}
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
	if len(figs) < 8 { // per trace: footprint, resident, bars, sizes, lifetimes (the carving trace has no real-malloc gap)
		t.Errorf("%d figures in the rendered page, want at least 8", len(figs))
	}
	for i, f := range figs {
		if !strings.Contains(f, "<svg") || !strings.Contains(f, "<path") && !strings.Contains(f, "<rect x=") {
			t.Errorf("figure %d has no chart that draws:\n%.300s", i, f)
		}
	}

	shot := os.Getenv("CARVE_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(os.TempDir(), "carve-report-screenshot.png")
	}
	runChromium(t, browser, page, "--window-size=1000,2400", "--screenshot="+shot)
	if fi, err := os.Stat(shot); err != nil || fi.Size() < 10000 {
		t.Errorf("screenshot %s: %v", shot, err)
	}
	t.Logf("report %d KB, %d figures; screenshot in %s", fi.Size()>>10, len(figs), shot)
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
// next to a live session.
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
	for _, want := range []string{"first-fit at the chosen moment (event 6000)", "2000 holes, the largest 1.0 KiB"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if code := run([]string{"report", "--map-at", "-1", "gen:bump:n=10"}, &stdout, &stderr); code != 2 {
		t.Errorf("--map-at -1: exit %d, want 2", code)
	}
}
