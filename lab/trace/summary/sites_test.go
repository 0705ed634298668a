package summary

import (
	"strings"
	"testing"

	"github.com/carvelab/carve/lab/trace"
)

// TestSummarySites: a type allocated at two sites has a label per site;
// the summary counts it once among the types, and each site once among
// the sites, with the types allocated there.
func TestSummarySites(t *testing.T) {
	const text = `# carve trace v3
l 1 uint8 ptrbytes=0 site="app.(*Cache).Set (cache.go:88)" size=1
l 2 uint8 ptrbytes=0 site="app.load (load.go:12)" size=1
l 3 app.Meta ptrbytes=0 site="app.(*Cache).Set (cache.go:88)" size=32
l 4 uint8 ptrbytes=0 size=1
a 1 1024 @1
a 2 1024 @1
a 3 512 @2
a 4 32 @3
a 5 2048 @4
f 2
`
	r, err := trace.NewReader(strings.NewReader(text), "sites.trace", trace.Auto)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Of(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Labels) != 2 {
		t.Fatalf("types %+v, want uint8 and app.Meta", s.Labels)
	}
	byName := map[string]LabelStat{}
	for _, l := range s.Labels {
		byName[l.Name] = l
	}
	if u := byName["uint8"]; u.Bytes != 2*1024+512+2048 || u.Allocs != 4 || u.Freed != 1 || u.GoName() != "[]byte" || u.Site != "" {
		t.Errorf("uint8 over its sites: %+v", u)
	}
	want := map[string]struct {
		bytes uint64
		names string
	}{
		"app.(*Cache).Set (cache.go:88)": {2*1024 + 32, "uint8, app.Meta"},
		"app.load (load.go:12)":          {512, "uint8"},
	}
	if len(s.Sites) != len(want) {
		t.Fatalf("sites %+v, want %d", s.Sites, len(want))
	}
	for _, st := range s.Sites {
		w, ok := want[st.Site]
		if !ok || st.Bytes != w.bytes || st.Name != w.names {
			t.Errorf("site %q: %d bytes of %q, want %+v", st.Site, st.Bytes, st.Name, w)
		}
	}
	if len(s.TypeSites) != 3 || s.TypeSites[0].Name != "uint8" || s.TypeSites[0].Site != "app.(*Cache).Set (cache.go:88)" || s.TypeSites[0].Bytes != 2*1024 {
		t.Errorf("TypeSites %+v: want uint8 at Cache.Set (2048 bytes) first, of three", s.TypeSites)
	}
	cells := s.SiteCells(0)
	if len(cells) != 2 || !strings.HasPrefix(cells[0][len(cells[0])-1], "app.(*Cache).Set (cache.go:88): ") {
		t.Errorf("SiteCells = %q", cells)
	}
}
