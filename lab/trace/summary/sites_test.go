package summary

import (
	"bytes"
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

// TestSummaryCSites: a C program's sites are labels of no type (as the
// importers' call stacks make them); a realloc at another site moves its
// object's bytes to that site, and a site is printed alone, with no type.
func TestSummaryCSites(t *testing.T) {
	var tab trace.Labels
	site := func(s string) uint32 {
		l, err := tab.Intern(trace.Label{Attrs: []trace.Attr{{Key: trace.AttrSite, Value: s}}})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	node, name, libc := site("make_node (prog.c:12)"), site("make_name (prog)"), site("libc.so.6+0x500")
	evs := []trace.Event{
		{Op: trace.Alloc, ID: 1, Size: 100, Label: node},
		{Op: trace.Alloc, ID: 2, Size: 50, Label: name},
		{Op: trace.Calloc, ID: 3, N: 4, Size: 32, Label: libc},
		{Op: trace.Realloc, ID: 2, Size: 300, Label: node},
		{Op: trace.Alloc, ID: 4, Size: 7, Label: name},
		{Op: trace.Alloc, ID: 5, Size: 5},
		{Op: trace.Free, ID: 1},
	}
	s, err := OfSource(trace.LabeledEvents(evs, &tab))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, st := range s.Sites {
		got[st.Site] = st.Bytes
	}
	if got["make_node (prog.c:12)"] != 400 || got["make_name (prog)"] != 7 || got["libc.so.6+0x500"] != 32 {
		t.Errorf("sites at the peak: %v", got)
	}
	var buf bytes.Buffer
	if err := s.WriteSites(&buf, 10); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "make_node (prog.c:12)\n") {
		t.Errorf("a C site is printed alone, with no type:\n%s", buf.String())
	}
}
