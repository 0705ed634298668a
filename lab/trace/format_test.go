package trace

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestFormatTable checks each entry of the table of formats: a name that
// ParseFormat takes back and its error lists, a doc, a way to be
// detected and an importer.
func TestFormatTable(t *testing.T) {
	_, err := ParseFormat("xml")
	if err == nil {
		t.Fatal("ParseFormat(xml) succeeded")
	}
	seen := map[string]bool{}
	for _, f := range append([]Format{Auto}, Formats()...) {
		name := f.String()
		if name == "" || seen[name] {
			t.Errorf("format %d: name %q empty or taken", f, name)
		}
		seen[name] = true
		if f.Doc() == "" || strings.Contains(f.Doc(), "\n") {
			t.Errorf("%s: doc %q, want one line", f, f.Doc())
		}
		if !strings.Contains(err.Error(), name) {
			t.Errorf("ParseFormat's error %q does not name %s", err, name)
		}
		if f == Auto {
			continue
		}
		if ft := formats[f]; ft.open == nil || ft.head == nil && ft.line == nil {
			t.Errorf("%s: no importer, or no way to be detected", f)
		}
	}
}

// TestDetectLineClaims checks that no line is claimed by two formats, so
// that the order of the table does not decide detection: the lines of
// the golden and generated traces, and lines at the borders between
// formats.
func TestDetectLineClaims(t *testing.T) {
	lines := []string{
		"+ 0x55d0 0x10", "- (nil)", "+ 10 2 5627750451d0", "- 5627750451d0", "@ ./p:[0x4005e1] + 0x1 0x10", "= Start", "= End",
		"1 2", "20000 3 4 1", " 3 4", "12: malloc 0x1 16", "12:malloc 0x1 16", "module 0x7f00 libc.so", "stack 1 0x10",
		"==12== Memcheck", "--12-- malloc(16) = 0x1", "--00:00:00:02.657 12-- free(0x1)",
		"# carve trace v1", "# carve trace v2", "a 1 16", "f 1", "r 1 32", "l 1 main.T", "a 1 16 @1", "t 2",
		"v 10400 3", "x 5 /bin/p", "m 1 -", "s 4 main", "i 1 2 3", "c 10", "S 1", "A 1", "R 1", "I 1", "X 2",
	}
	for _, dir := range []string{"testdata/golden", "testdata/gen"} {
		files, err := filepath.Glob(filepath.Join(dir, "*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			if strings.HasSuffix(file, ".golden") {
				continue
			}
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(bytes.NewReader(b))
			for sc.Scan() {
				lines = append(lines, sc.Text())
			}
		}
	}
	for _, l := range lines {
		var claims []string
		for f, ft := range formats {
			if ft.line != nil && ft.line([]byte(l)) {
				claims = append(claims, Format(f).String())
			}
		}
		if len(claims) > 1 {
			t.Errorf("%q is claimed by %v", l, claims)
		}
	}
}

// TestFormatsDocumented checks that the package documentation describes
// every format of the table: a paragraph of its own in "# Formats" that
// starts with its name, and a word in the paragraph on detection.
func TestFormatsDocumented(t *testing.T) {
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start, end := strings.Index(doc, "// # Formats\n"), strings.Index(doc, "// # Generators and summaries\n")
	if start < 0 || end < start {
		t.Fatal("doc.go: no section # Formats before # Generators and summaries")
	}
	formatsDoc := doc[start:end]
	detection := formatsDoc[strings.Index(formatsDoc, "// Auto detection"):]
	for _, f := range Formats() {
		name := regexp.QuoteMeta(f.String())
		if !regexp.MustCompile(`(?im)^//\n// ` + name + `[ ,]`).MatchString(formatsDoc) {
			t.Errorf("doc.go: # Formats has no paragraph that starts with %q", f)
		}
		if !regexp.MustCompile(`(?i)\b` + name + `\b`).MatchString(detection) {
			t.Errorf("doc.go: the paragraph on detection does not name %q", f)
		}
	}
}
