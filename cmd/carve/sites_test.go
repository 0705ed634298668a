package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sitesTrace is a Go program's trace whose labels carry sites: []byte
// from two sites, a struct from one of them.
const sitesTrace = `# carve trace v3
l 1 uint8 ptrbytes=0 site="main.(*Cache).Set (cache.go:88)" size=1
l 2 uint8 ptrbytes=0 site="main.parse (req.go:12)" size=1
l 3 main.Meta ptrbytes=0 site="main.(*Cache).Set (cache.go:88)" size=32
a 1 8192 @1
a 2 8192 @1
a 3 512 @2
a 4 32 @3
f 3
a 5 512 @2
`

// TestSites: carve stats --by site lists the sites with the types
// allocated at each; --heap site=PATTERN routes a site's objects, of
// every type or of the type named beside it; a pattern that names no site
// is refused at once, in one line.
func TestSites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sites.trace")
	if err := os.WriteFile(path, []byte(sitesTrace), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"stats", "--by", "site", path}, &stdout, &stderr); code != 0 {
		t.Fatalf("stats --by site: exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"main.(*Cache).Set (cache.go:88): uint8, main.Meta", "main.parse (req.go:12): uint8"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stats --by site lacks %q:\n%s", want, stdout.String())
		}
	}
	for _, tc := range []struct {
		arg    string
		allocs int64
	}{
		{"site=Cache.Set", 3},
		{"type=[]byte,site=cache.go:88", 2},
		{"site=main.parse", 2},
	} {
		stdout.Reset()
		args := []string{"replay", "--alloc", "best-fit", "--heap", tc.arg, "--format", "json", path}
		if code := run(args, &stdout, &stderr); code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, stderr.String())
		}
		var out struct {
			Rows []struct {
				Allocator string
				Routed    *struct{ Allocs int64 }
			}
		}
		if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		var routed *struct{ Allocs int64 }
		for _, r := range out.Rows {
			if strings.Contains(r.Allocator, "+heap(") {
				routed = r.Routed
			}
		}
		if routed == nil || routed.Allocs != tc.allocs {
			t.Errorf("--heap %s: routed %+v, want %d allocations", tc.arg, routed, tc.allocs)
		}
	}
	for _, arg := range []string{"site=Cache.Get", "type=main.Meta,site=main.parse", "site=", "site=a,site=b"} {
		stderr.Reset()
		if code := run([]string{"replay", "--heap", arg, path}, &stdout, &stderr); code != 2 || strings.Count(strings.TrimSpace(stderr.String()), "\n") > 1 {
			t.Errorf("--heap %s: exit %d, %q; want 2 and one line (and the help's)", arg, code, stderr.String())
		}
	}
}
