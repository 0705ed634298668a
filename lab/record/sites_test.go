package record

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/pprof/profile"
)

// writeProfile writes a heap profile of samples (stack of function
// names, innermost first; objects; size) to a file.
func writeProfile(t *testing.T, samples []struct {
	stack   []string
	objects int64
	size    int64
}) string {
	t.Helper()
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "alloc_objects", Unit: "count"}, {Type: "alloc_space", Unit: "bytes"},
			{Type: "inuse_objects", Unit: "count"}, {Type: "inuse_space", Unit: "bytes"}},
	}
	funcs := map[string]*profile.Function{}
	for _, s := range samples {
		var locs []*profile.Location
		for _, name := range s.stack {
			f := funcs[name]
			if f == nil {
				f = &profile.Function{ID: uint64(len(funcs) + 1), Name: name, Filename: "/src/" + name + ".go"}
				funcs[name] = f
				p.Function = append(p.Function, f)
			}
			loc := &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: f, Line: 10}}}
			p.Location = append(p.Location, loc)
			locs = append(locs, loc)
		}
		p.Sample = append(p.Sample, &profile.Sample{Location: locs, Value: []int64{s.objects, s.objects * s.size, 0, 0},
			NumLabel: map[string][]int64{"bytes": {s.size}}})
	}
	path := filepath.Join(t.TempDir(), "mem.pprof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := p.Write(f); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSites: a call stack is reduced to its innermost frame of the
// program's own code (the runtime's frames dropped, the standard
// library's passed over), and a size gives its one site to the trace's
// objects of that size only when it has one site and the profile counts
// MinSiteCover of the trace's objects of that size.
func TestSites(t *testing.T) {
	std := map[string]bool{"bytes": true, "fmt": true}
	path := writeProfile(t, []struct {
		stack   []string
		objects int64
		size    int64
	}{
		{[]string{"runtime.mallocgc", "runtime.makeslice", "bytes.growSlice", "example.com/app.(*Cache).Set"}, 100, 1024},
		{[]string{"runtime.mallocgc", "runtime.newobject", "example.com/app.newMeta"}, 50, 32},
		{[]string{"runtime.mallocgc", "runtime.newobject", "example.com/app.other"}, 5, 32},
		{[]string{"runtime.mallocgc", "fmt.Sprintf"}, 7, 48},
		{[]string{"runtime.mallocgc", "runtime.makeslice", "example.com/app.load"}, 3, 4096},
	})
	s, err := readSites(path, std)
	if err != nil {
		t.Fatal(err)
	}
	s.cover(map[uint64]int64{1024: 100, 32: 55, 48: 7, 4096: 30})
	for _, tc := range []struct {
		size uint64
		want string
	}{
		{1024, "app.(*Cache).Set (app.(*Cache).Set.go:10)"}, // past bytes, to the program's frame
		{32, "by share"},                        // two sites: each object one of them, by share
		{48, "fmt.Sprintf (fmt.Sprintf.go:10)"}, // no frame of the program's: the first outside the runtime
		{4096, ""},                              // the profile counts 3 of the trace's 30
		{8, ""},                                 // not in the profile
	} {
		got, byShare := s.Of(tc.size, 1)
		if tc.want == "by share" {
			if !byShare || (got != "app.newMeta (app.newMeta.go:10)" && got != "app.other (app.other.go:10)") {
				t.Errorf("Of(%d) = %q, %v; want one of its two sites, by share", tc.size, got, byShare)
			}
			continue
		}
		if got != tc.want || byShare {
			t.Errorf("Of(%d) = %q, %v; want %q", tc.size, got, byShare, tc.want)
		}
	}
	if shares := s.Shares(32); len(shares) != 2 || shares[0].Objects != 50 {
		t.Errorf("Shares(32) = %+v, want newMeta's 50 first, then other's 5", shares)
	}
	if want := int64(100*1024 + 7*48); s.OneSite != want {
		t.Errorf("OneSite = %d, want %d", s.OneSite, want)
	}
	// By share: the same object the same site, and over many objects
	// each site its share (50 to 5).
	counts := map[string]int{}
	for id := range uint64(11000) {
		site, _ := s.Of(32, id)
		if again, _ := s.Of(32, id); again != site {
			t.Fatalf("object %d: %q, then %q", id, site, again)
		}
		counts[site]++
	}
	if n := counts["app.newMeta (app.newMeta.go:10)"]; n < 9500 || n > 10500 {
		t.Errorf("by share: %v, want about 10000 to newMeta, 1000 to other", counts)
	}
}
