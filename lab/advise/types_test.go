package advise

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/carvelab/carve/lab/replay"
	"github.com/carvelab/carve/lab/rows"
	"github.com/carvelab/carve/lab/traces"
	"github.com/carvelab/carve/pool"
)

// TestMain lets the test binary serve as a row's child (the go row
// replays in one), as the carve command does.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == rows.ChildCommand {
		if err := rows.ServeChild(os.Stdin, os.Stdout); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// churnTrace writes a labelled trace: 4,000 main.buf objects of 4 KiB
// (pointer-free) kept live and replaced one at a time, 40,000 times, in
// random order; beside them main.node objects (with pointers) and a few
// small main.tag ones (pointer-free), too few to be worth a replay, and
// 300 []byte buffers of three sizes replaced as the buffers are. On the
// Go heap at GOGC 100 the dead
// buffers pile up to about the live ones' bytes before each collection;
// in a pool a freed buffer is the next one allocated.
func churnTrace(t *testing.T) traces.Trace {
	t.Helper()
	path := filepath.Join(t.TempDir(), "churn.trace")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "# carve trace v2")
	fmt.Fprintln(w, "l 1 main.buf size=4096 ptrbytes=0")
	fmt.Fprintln(w, "l 2 main.node size=32 ptrbytes=16")
	fmt.Fprintln(w, "l 3 main.tag size=16 ptrbytes=0")
	fmt.Fprintln(w, "l 4 uint8 size=1 ptrbytes=0")
	rng := rand.New(rand.NewPCG(1, 2))
	id := uint64(0)
	live := make([]uint64, 4000)
	for i := range live {
		id++
		live[i] = id
		fmt.Fprintf(w, "a %d 4096 @1\n", id)
		id++
		fmt.Fprintf(w, "a %d 32 @2\n", id)
	}
	bytes := make([]uint64, 300)
	byteSize := func(i int) int { return 512 << (i % 3) }
	for i := range bytes {
		id++
		bytes[i] = id
		fmt.Fprintf(w, "a %d %d @4\n", id, byteSize(i))
	}
	for i := range 40000 {
		if i%4 == 0 {
			j := rng.IntN(len(bytes))
			fmt.Fprintf(w, "f %d\n", bytes[j])
			id++
			bytes[j] = id
			fmt.Fprintf(w, "a %d %d @4\n", id, byteSize(i/4))
		}
		j := rng.IntN(len(live))
		fmt.Fprintf(w, "f %d\n", live[j])
		id++
		live[j] = id
		fmt.Fprintf(w, "a %d 4096 @1\n", id)
		if i%100 == 0 {
			id++
			fmt.Fprintf(w, "a %d 16 @3\n", id)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	tr, err := traces.Resolve(path)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestAdviseTypes measures a trace whose churning buffers a pool holds at
// their live bytes where the Go heap holds about twice them: the
// buffers' type must be suggested into pool.NewOf, its saving near what
// the GOGC rule predicts, the type with pointers refused, the types
// under the floor left untried, and the code the move measured.
func TestAdviseTypes(t *testing.T) {
	if testing.Short() {
		t.Skip("replays the Go heap in child processes")
	}
	tr := churnTrace(t)
	if !Typed(tr) {
		t.Fatal("Typed: false for a trace of typed objects")
	}
	planned := 0
	adv, err := AdviseTypes(TypeConfig{Trace: tr, Repeats: 3, Jobs: 2, Planned: func(n int) { planned = n }})
	if err != nil {
		t.Fatal(err)
	}
	if adv.Baseline.Error != "" {
		t.Fatalf("the Go heap failed: %s", adv.Baseline.Error)
	}
	if len(adv.Suggested) != 1 || adv.Suggested[0].Type != "main.buf" {
		t.Fatalf("suggested %+v, want main.buf alone; tried %+v, baseline %+v", adv.Suggested, adv.Tried, adv.Baseline)
	}
	buf := adv.Suggested[0]
	tg := buf.Chosen()
	// The rule predicts the buffers' bytes at the peak (16 MiB) saved;
	// the measure must be of that order: at least half of it, and no more
	// than the Go heap held above live.
	if tg.Low < buf.Rule/2 || tg.Low > adv.Baseline.PeakRSS-adv.Baseline.PeakLive {
		t.Errorf("main.buf saves %d bytes; the rule predicts %d, the Go heap held %d above live", tg.Low, buf.Rule, adv.Baseline.PeakRSS-adv.Baseline.PeakLive)
	}
	// One size, no slice: pool.NewOf[buf] at its own size, and a heap;
	// their bounds overlap or the pool saves more: the pool is printed.
	if tg.Move.Kind() != "pool.NewOf" || tg.Move.Chunk != 4096 || len(buf.Targets) != 2 || buf.Targets[1].Move.Kind() != "heap" {
		t.Errorf("main.buf's moves %+v, want pool.NewOf (4096) first, then a heap", buf.Targets)
	}
	// The baseline and main.buf's two moves, at each of 3 GOGCs: the
	// others are under the floor of 1 MiB.
	if want := 3 * (1 + 2); adv.Replays != want || planned != want {
		t.Errorf("%d replays, %d planned, want %d", adv.Replays, planned, want)
	}
	if len(adv.Left) != 1 || adv.Left[0].Why != LeftFloor || adv.Left[0].Types != 2 {
		t.Errorf("left %+v, want main.tag and []byte under the floor", adv.Left)
	}
	if len(adv.Refused) != 1 || adv.Refused[0].Type != "main.node" {
		t.Errorf("refused %+v, want main.node alone", adv.Refused)
	}
	if adv.Go != Code([]Move{tg.Move}) || !strings.Contains(adv.Go, "bufs, err := pool.NewOf[buf]()") {
		t.Errorf("the code is not main.buf's move:\n%s", adv.Go)
	}

	text := writeText(t, adv.WriteText, 100)
	t.Log(text)
	checkWidth(t, text, 100)
	if wide := writeText(t, adv.WriteText, 0); !hasRow(wide, []string{"type", "into", "saving", "above 0 at", "at most", "at the trace's peak", "objects", "peak RSS"}) {
		t.Errorf("wide: want every column:\n%s", wide)
	}
	flat := strings.Join(strings.Fields(text), " ") // the paragraphs unwrapped
	for _, want := range []string{"main.buf into pool.NewOf", "main.node", "the figures assume", "not tried", LeftFloor, Rule(3), TargetRule} {
		if !strings.Contains(flat, want) {
			t.Errorf("the text lacks %q:\n%s", want, text)
		}
	}
	js, err := json.Marshal(adv)
	if err != nil {
		t.Fatal(err)
	}
	var back TypeAdvice
	if err := json.Unmarshal(js, &back); err != nil || back.Schema != TypesSchema || len(back.Suggested) != len(adv.Suggested) || back.Suggested[0].Targets[0].Move.Chunk != 4096 {
		t.Errorf("JSON round trip: %v, schema %q, %+v suggested", err, back.Schema, back.Suggested)
	}

	// With no floor, the []byte of three sizes is tried in a heap and in
	// a pool per size, and its class rounding measured (512, 1024 and
	// 2048 are classes: the requests they stand for start at 481, 897 and
	// 1793); main.tag, one size, in pool.NewOf and a heap.
	adv, err = AdviseTypes(TypeConfig{Trace: tr, Repeats: 1, Jobs: 2, Floor: &Floor{}})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string][]string{}
	for _, tt := range adv.Tried {
		for _, tg := range tt.Targets {
			kinds[tt.Type] = append(kinds[tt.Type], tg.Move.Kind())
		}
		if tt.Type == "[]byte" {
			if r := tt.Rounding; r == nil || r.MostPercent <= 0 || r.EvenPercent >= r.MostPercent || r.Least >= r.Even || r.Even >= r.Traced {
				t.Errorf("[]byte's class rounding %+v: want least < even < traced", tt.Rounding)
			}
			for _, tg := range tt.Targets {
				if tg.Move.Kind() == "pools" && !slices.Equal(tg.Move.Sizes, []int{512, 1024, 2048}) {
					t.Errorf("[]byte's pools of sizes %v, want 512, 1024, 2048", tg.Move.Sizes)
				}
			}
		}
	}
	for typ, want := range map[string][]string{"main.buf": {"pool.NewOf", "heap"}, "main.tag": {"pool.NewOf", "heap"}, "[]byte": {"heap", "pools"}} {
		got := slices.Sorted(slices.Values(kinds[typ]))
		if slices.Sort(want); !slices.Equal(got, want) {
			t.Errorf("%s measured into %v, want %v", typ, got, want)
		}
	}
}

// TestAdviseTypesNoLabels: a trace without types is ErrNoTypes.
func TestAdviseTypesNoLabels(t *testing.T) {
	tr, err := traces.Resolve("gen:connection:n=100")
	if err != nil {
		t.Fatal(err)
	}
	if Typed(tr) {
		t.Error("Typed: true for a trace without labels")
	}
	if _, err := AdviseTypes(TypeConfig{Trace: tr}); !errors.Is(err, ErrNoTypes) {
		t.Errorf("AdviseTypes: %v, want ErrNoTypes", err)
	}

	// A C program's call-stack sites are labels of no type.
	path := filepath.Join(t.TempDir(), "c.trace")
	if err := os.WriteFile(path, []byte("# carve trace v2\nl 1 \"\" site=\"make_node (prog.c:6)\"\na 1 48 @1\nf 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if tr, err = traces.Resolve(path); err != nil {
		t.Fatal(err)
	}
	if Typed(tr) {
		t.Error("Typed: true for a trace of C sites")
	}
}

func TestVarName(t *testing.T) {
	for _, tc := range []struct {
		name string
		i    int
		want string
	}{
		{"session", 0, "sessions"},
		{"Header", 0, "headers"},
		{"[16]uint8", 2, "pool3"},
		{"[]main.point", 0, "pool1"},
		{"struct { X int }", 0, "pool1"},
		{"Ünïcode", 0, "ünïcodes"},
	} {
		if got := varName(tc.name, tc.i); got != tc.want {
			t.Errorf("varName(%q, %d) = %q, want %q", tc.name, tc.i, got, tc.want)
		}
	}
}

// TestQuorum: four pairs in five must save, rounded up, and the median
// saving must reach MinTypeSaving.
func TestQuorum(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 4, 6: 5, 9: 8, 10: 8} {
		if got := Quorum(n); got != want {
			t.Errorf("Quorum(%d) = %d, want %d", n, got, want)
		}
	}
	// A trial whose chosen move saved lows at each GOGC.
	trial := func(low int64, saved int, err string) TypeTrial {
		return TypeTrial{NoiseBound: 8 << 20, Targets: []Target{{Low: low, Saved: saved, Error: err}}}
	}
	tests := []struct {
		name  string
		trial TypeTrial
		pairs int
		want  bool
	}{
		{"every pair saves", trial(1<<20, 5, ""), 5, true},
		{"one pair of five loses", trial(1<<20, 4, ""), 5, true},
		{"two pairs of five lose", trial(1<<20, 3, ""), 5, false},
		{"one pair of three loses", trial(1<<20, 2, ""), 3, false},
		{"a median below the least saving", trial(MinTypeSaving-1, 5, ""), 5, false},
		{"more than the move can save", trial(9<<20, 5, ""), 5, false},
		{"a failed replay", trial(1<<20, 5, "stopped"), 5, false},
	}
	for _, tt := range tests {
		if got := tt.trial.passes(tt.pairs); got != tt.want {
			t.Errorf("%s: passes = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestLabelSizes: the sizes a type's objects come in, the most bytes
// first, and how far those size classes are above the requests they
// stand for.
func TestLabelSizes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bytes.trace")
	var b strings.Builder
	b.WriteString("# carve trace v2\nl 1 uint8 size=1 ptrbytes=0\nl 2 main.tag size=16 ptrbytes=0\n")
	id := 0
	alloc := func(n, size int, label string) {
		for range n {
			id++
			fmt.Fprintf(&b, "a %d %d%s\n", id, size, label)
		}
	}
	alloc(10, 512, " @1")  // 5120 bytes
	alloc(2, 4096, " @1")  // 8192
	alloc(3, 16, " @1")    // 48
	alloc(1, 1024, " @1")  // 1024
	alloc(1, 2048, " @1")  // 2048
	alloc(1, 4, " @1")     // below a pool's smallest chunk
	alloc(50, 8192, " @2") // another type
	alloc(50, 8192, "")    // no label
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := traces.Resolve(path)
	if err != nil {
		t.Fatal(err)
	}
	all, err := labelSizes(tr, []string{"uint8"})
	if err != nil {
		t.Fatal(err)
	}
	sizes := all["uint8"]
	want := []SizeCount{{4096, 2, 8192, nil}, {512, 10, 5120, nil}, {2048, 1, 2048, nil}, {1024, 1, 1024, nil}, {16, 3, 48, nil}, {4, 1, 4, nil}}
	if !reflect.DeepEqual(sizes, want) || len(all) != 1 {
		t.Fatalf("labelSizes = %+v, want uint8: %+v", all, want)
	}
	// The classes' bytes against the requests they stand for: 512 B
	// objects stand for 481..512 (10 of them), 4096 for 3457..4096 (2),
	// 16 for 9..16 (3), 1024 for 897..1024, 2048 for 1793..2048, and 4,
	// no class, for itself.
	rounding := classRounding(sizes, 1000)
	wantRounding := ClassRounding{Traced: 16436, Even: 4965 + 7553 + 37 + 960 + 1920 + 4, Least: 4810 + 6914 + 27 + 897 + 1793 + 4}
	wantRounding.EvenPercent = 100 * float64(wantRounding.Traced-wantRounding.Even) / float64(wantRounding.Traced)
	wantRounding.MostPercent = 100 * float64(wantRounding.Traced-wantRounding.Least) / float64(wantRounding.Traced)
	wantRounding.AtPeak = int64(1000 * wantRounding.EvenPercent / 100)
	if rounding != wantRounding {
		t.Errorf("classRounding = %+v, want %+v", rounding, wantRounding)
	}
	// Into pools, every size, each at least a pool's smallest chunk.
	ms := moves(TypeTrial{Type: "[]byte", Label: "uint8", Size: 1, Sizes: sizes})
	if len(ms) != 2 || ms[0].Kind() != "heap" || ms[1].Kind() != "pools" || !slices.Equal(ms[1].Sizes, []int{pool.LinkSize, 16, 512, 1024, 2048, 4096}) {
		t.Errorf("moves of []byte: %+v, want a heap and pools of every size", ms)
	}
}

// TestMoveCode holds a move's replay and its code to one description:
// the route its replays take sends the type's objects where the code
// puts them, at the sizes the code makes.
func TestMoveCode(t *testing.T) {
	for _, tc := range []struct {
		move  Move
		route replay.Route
		want  []string
	}{
		{Move{Type: "main.Meta", Label: "main.Meta", Elem: 40, Into: replay.IntoPools, Chunk: 40},
			replay.Route{Label: "main.Meta", Name: "main.Meta", Into: replay.IntoPools, Chunk: 40},
			[]string{"// Meta (package main) in one pool of 40-byte chunks", "metas, err := pool.NewOf[Meta]()", "defer metas.Pool().Close()", "x, err := metas.New()", "metas.Free(x) // where the program drops x, and on every replace"}},
		{Move{Type: "main.Meta", Label: "main.Meta", Elem: 40, Into: replay.IntoHeap},
			replay.Route{Label: "main.Meta", Name: "main.Meta", Into: replay.IntoHeap},
			[]string{"metas, err := heap.New()", "b, err := metas.Alloc(int(unsafe.Sizeof(Meta{})), int(unsafe.Alignof(Meta{})))", "metas.Free(b)"}},
		{Move{Type: "[]byte", Label: "uint8", Elem: 1, Into: replay.IntoHeap},
			replay.Route{Label: "uint8", Name: "[]byte", Into: replay.IntoHeap},
			[]string{"bufs, err := heap.New() // heap.Limit(n) caps the bytes it holds", "defer bufs.Close()", "b, err := bufs.Alloc(n, 1)", "bufs.Free(b) // where the program drops it, and on every replace", "a heap given n holds less"}},
		{Move{Type: "[]byte", Label: "uint8", Elem: 1, Into: replay.IntoPools, Sizes: []int{16, 512, 4096}},
			replay.Route{Label: "uint8", Name: "[]byte", Into: replay.IntoPools},
			[]string{"bufSizes := []int{16, 512, 4096}", "p, err := pool.New(size)", "bufPools[i] = p", "i, _ := slices.BinarySearch(bufSizes, n)", "b = b[:n]", "bufPools[j].Free(b)", "for n bytes up to 4096"}},
		{Move{Type: "[]int64", Label: "int64", Elem: 8, Into: replay.IntoHeap},
			replay.Route{Label: "int64", Name: "[]int64", Into: replay.IntoHeap},
			[]string{"int64Bufs, err := heap.New()", "b, err := int64Bufs.Alloc(n*8, 8)", "s := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(b))), n)"}},
	} {
		if got := tc.move.Route(); got != tc.route {
			t.Errorf("%s into %s: route %+v, want %+v", tc.move.Type, tc.move.Kind(), got, tc.route)
		}
		code := Code([]Move{tc.move})
		for _, line := range tc.want {
			if !strings.Contains(code, line) {
				t.Errorf("%s into %s: the code lacks %q:\n%s", tc.move.Type, tc.move.Kind(), line, code)
			}
		}
		// The pools the code makes are the route's: one per size of the
		// move, no other.
		if n := strings.Count(code, "pool.New("); tc.move.Kind() == "pools" && n != 1 {
			t.Errorf("pools: %d pool.New calls, want one loop over the sizes:\n%s", n, code)
		}
	}
}

// TestMayPass: a move is unproven when its upper bound passes the rule
// and is above how far the Go heap's peak moves from GOGC to GOGC.
func TestMayPass(t *testing.T) {
	trial := func(high int64, highs ...int64) TypeTrial {
		return TypeTrial{NoiseBound: 64 << 20, Targets: []Target{{Low: -1 << 20, High: high, Highs: highs}}}
	}
	for _, tc := range []struct {
		name   string
		trial  TypeTrial
		spread int64
		want   bool
	}{
		{"well above the spread", trial(40<<20, 30<<20, 40<<20, 41<<20, 39<<20, 42<<20), 10 << 20, true},
		{"within the spread", trial(9<<20, 8<<20, 9<<20, 10<<20, 9<<20, 9<<20), 27 << 20, false},
		{"two GOGCs of five lose", trial(40<<20, -1, -1, 41<<20, 39<<20, 42<<20), 10 << 20, false},
		{"more than the move can save", trial(70<<20, 70<<20, 70<<20, 70<<20, 70<<20, 70<<20), 10 << 20, false},
	} {
		if got := tc.trial.mayPass(5, tc.spread); got != tc.want {
			t.Errorf("%s: mayPass = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestAdviseBySite: a type most of whose bytes have sites is tried site
// by site: each site's objects are its own candidate, routed by the site,
// and named by it; the code says where it goes.
func TestAdviseBySite(t *testing.T) {
	if testing.Short() {
		t.Skip("replays the Go heap in child processes")
	}
	path := filepath.Join(t.TempDir(), "sites.trace")
	var b strings.Builder
	b.WriteString("# carve trace v2\n")
	b.WriteString("l 1 uint8 ptrbytes=0 site=\"main.(*Cache).Set (cache.go:88)\" size=1\n")
	b.WriteString("l 2 uint8 ptrbytes=0 site=\"main.parse (req.go:12)\" size=1\n")
	rng := rand.New(rand.NewPCG(7, 8))
	id := uint64(0)
	live := map[int][]uint64{1: nil, 2: nil}
	for i := range 20000 {
		l := 1 + i%2
		size := 8192
		if l == 2 {
			size = 512
		}
		if len(live[l]) >= 300 {
			j := rng.IntN(len(live[l]))
			fmt.Fprintf(&b, "f %d\n", live[l][j])
			live[l] = append(live[l][:j], live[l][j+1:]...)
		}
		id++
		live[l] = append(live[l], id)
		fmt.Fprintf(&b, "a %d %d @%d\n", id, size, l)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := traces.Resolve(path)
	if err != nil {
		t.Fatal(err)
	}
	adv, err := AdviseTypes(TypeConfig{Trace: tr, Repeats: 1, Jobs: 2, Floor: &Floor{}})
	if err != nil {
		t.Fatal(err)
	}
	sites := map[string]TypeTrial{}
	for _, tt := range adv.Tried {
		sites[tt.Site] = tt
	}
	set, parse := sites["main.(*Cache).Set (cache.go:88)"], sites["main.parse (req.go:12)"]
	if len(adv.Tried) != 2 || set.Type != "[]byte" || parse.Type != "[]byte" {
		t.Fatalf("tried %+v: want []byte at each of its two sites", adv.Tried)
	}
	if set.Bytes < 300*8192 || parse.Bytes > 300*512 {
		t.Errorf("bytes at the peak: Cache.Set %d, parse %d", set.Bytes, parse.Bytes)
	}
	for _, tt := range []TypeTrial{set, parse} {
		tg := tt.Chosen()
		if tg == nil || tg.Move.Route().Site != tt.Site || len(tt.Sizes) != 1 {
			t.Errorf("%s: chosen %+v, sizes %+v: want a move routed by its site, of its one size", tt.name(), tg, tt.Sizes)
		}
		if code := Code([]Move{tg.Move}); !strings.Contains(code, "// at "+tt.Site+", where the program allocates them") {
			t.Errorf("%s: the code does not say where it goes:\n%s", tt.name(), code)
		}
	}
}

// TestCodeNames: two moves of one type (at two sites) get names of their
// own, so that their declarations can stand side by side.
func TestCodeNames(t *testing.T) {
	a := Move{Type: "[]byte", Label: "uint8", Elem: 1, Into: replay.IntoPools, Sizes: []int{512}, Site: "main.a (a.go:1)"}
	b := Move{Type: "[]byte", Label: "uint8", Elem: 1, Into: replay.IntoPools, Sizes: []int{4096}, Site: "main.b (b.go:2)"}
	code := Code([]Move{a, b})
	for _, want := range []string{"bufSizes := []int{512}", "bufSizes2 := []int{4096}", "bufPools2 := make([]*pool.Pool, len(bufSizes2))"} {
		if !strings.Contains(code, want) {
			t.Errorf("the code lacks %q:\n%s", want, code)
		}
	}
}
