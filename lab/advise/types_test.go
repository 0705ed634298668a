package advise

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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
// buffers' type must be suggested, its saving near what the GOGC rule
// predicts, the type with pointers refused, and the code name the type.
func TestAdviseTypes(t *testing.T) {
	if testing.Short() {
		t.Skip("replays the Go heap in child processes")
	}
	tr := churnTrace(t)
	if !Labelled(tr) {
		t.Fatal("Labelled: false for a trace of labelled objects")
	}
	adv, err := AdviseTypes(TypeConfig{Trace: tr, Repeats: 3, Jobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if adv.Baseline.Error != "" {
		t.Fatalf("the Go heap failed: %s", adv.Baseline.Error)
	}
	var buf *TypeTrial
	for i := range adv.Suggested {
		if adv.Suggested[i].Type == "main.buf" {
			buf = &adv.Suggested[i]
		}
	}
	if buf == nil {
		t.Fatalf("main.buf not suggested; tried %+v, baseline %+v", adv.Tried, adv.Baseline)
	}
	// The rule predicts the buffers' bytes at the peak (16 MiB) saved;
	// the measure must be of that order: at least half of it, and no more
	// than the Go heap held above live.
	if buf.Saving < buf.Rule/2 || buf.Saving > adv.Baseline.PeakRSS-adv.Baseline.PeakLive {
		t.Errorf("main.buf saves %d bytes; the rule predicts %d, the Go heap held %d above live", buf.Saving, buf.Rule, adv.Baseline.PeakRSS-adv.Baseline.PeakLive)
	}
	if buf.Into != "pool" {
		t.Errorf("main.buf into %s; objects dying one at a time belong in a pool", buf.Into)
	}
	// main.tag's few bytes could not save MinTypeSaving: not replayed.
	// uint8, of three sizes, is tried in a heap too, and its class
	// rounding measured (512, 1024 and 2048 are classes: the requests
	// they stand for start at 481, 897 and 1793).
	for _, tt := range adv.Tried {
		switch tt.Type {
		case "main.tag":
			if !tt.Skipped || tt.NoiseBound >= MinTypeSaving {
				t.Errorf("main.tag: skipped %v, at most %d: want it skipped", tt.Skipped, tt.NoiseBound)
			}
		case "uint8":
			var into []string
			for _, b := range tt.Bounds {
				into = append(into, b.Into)
			}
			slices.Sort(into)
			if !slices.Equal(into, []string{"arena", "heap", "pool"}) {
				t.Errorf("uint8 measured into %v, want a pool, an arena and a heap", into)
			}
			if r := tt.Rounding; r == nil || r.MostPercent <= 0 || r.EvenPercent >= r.MostPercent || r.Least >= r.Even || r.Even >= r.Traced {
				t.Errorf("uint8's class rounding %+v: want least < even < traced", tt.Rounding)
			}
		}
	}
	// The baseline and main.buf into a pool and an arena, uint8 into
	// those and a heap, at each of 3 GOGCs: main.tag is not replayed.
	if want := 3 * (1 + 2 + 3); adv.Replays != want {
		t.Errorf("%d replays, want %d", adv.Replays, want)
	}
	if len(adv.Refused) != 1 || adv.Refused[0].Type != "main.node" {
		t.Errorf("refused %+v, want main.node alone", adv.Refused)
	}
	if !strings.Contains(adv.Go, "bufs, err := pool.NewOf[buf]()") {
		t.Errorf("the code does not make main.buf's pool:\n%s", adv.Go)
	}

	var text bytes.Buffer
	if err := adv.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Log(text.String())
	for _, want := range []string{"main.buf into a pool", "main.node", "the figures assume", "not replayed", "uint8: into a", "into a pool", "into an arena", "into a heap", "under-stated"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text lacks %q:\n%s", want, text.String())
		}
	}
	js, err := json.Marshal(adv)
	if err != nil {
		t.Fatal(err)
	}
	var back TypeAdvice
	if err := json.Unmarshal(js, &back); err != nil || back.Schema != TypesSchema || len(back.Suggested) != len(adv.Suggested) {
		t.Errorf("JSON round trip: %v, schema %q, %d suggested", err, back.Schema, len(back.Suggested))
	}
}

// TestAdviseTypesNoLabels: a trace without types is ErrNoTypes.
func TestAdviseTypesNoLabels(t *testing.T) {
	tr, err := traces.Resolve("gen:connection:n=100")
	if err != nil {
		t.Fatal(err)
	}
	if Labelled(tr) {
		t.Error("Labelled: true for a trace without labels")
	}
	if _, err := AdviseTypes(TypeConfig{Trace: tr}); !errors.Is(err, ErrNoTypes) {
		t.Errorf("AdviseTypes: %v, want ErrNoTypes", err)
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
	tests := []struct {
		name  string
		trial TypeTrial
		pairs int
		want  bool
	}{
		{"every pair saves", TypeTrial{Saved: 5, Saving: 1 << 20}, 5, true},
		{"one pair of five loses", TypeTrial{Saved: 4, Saving: 1 << 20}, 5, true},
		{"two pairs of five lose", TypeTrial{Saved: 3, Saving: 1 << 20}, 5, false},
		{"one pair of three loses", TypeTrial{Saved: 2, Saving: 1 << 20}, 3, false},
		{"a median below the least saving", TypeTrial{Saved: 5, Saving: MinTypeSaving - 1}, 5, false},
		{"a failed replay", TypeTrial{Saved: 5, Saving: 1 << 20, Measured: Measured{Error: "stopped"}}, 5, false},
	}
	for _, tt := range tests {
		if got := tt.trial.suggested(tt.pairs); got != tt.want {
			t.Errorf("%s: suggested = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestBufferPools: a []byte suggested into pools gets one pool per size
// its objects come in, the most bytes first, and the sizes beyond
// maxPools are said to stay with make.
func TestBufferPools(t *testing.T) {
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
	sizes, err := labelSizes(tr, "uint8", uint64(pool.LinkSize), maxPoolChunk)
	if err != nil {
		t.Fatal(err)
	}
	// The classes' bytes against the requests they stand for: 512 B
	// objects stand for 481..512 (10 of them), 4096 for 3457..4096 (2),
	// 16 for 9..16 (3), 1024 for 897..1024, 2048 for 1793..2048, and 4,
	// no class, for itself.
	rounding, err := classRounding(tr, "uint8", 1000)
	if err != nil {
		t.Fatal(err)
	}
	wantRounding := ClassRounding{Traced: 16436, Even: 4965 + 7553 + 37 + 960 + 1920 + 4, Least: 4810 + 6914 + 27 + 897 + 1793 + 4}
	wantRounding.EvenPercent = 100 * float64(wantRounding.Traced-wantRounding.Even) / float64(wantRounding.Traced)
	wantRounding.MostPercent = 100 * float64(wantRounding.Traced-wantRounding.Least) / float64(wantRounding.Traced)
	wantRounding.AtPeak = int64(1000 * wantRounding.EvenPercent / 100)
	if rounding != wantRounding {
		t.Errorf("classRounding = %+v, want %+v", rounding, wantRounding)
	}
	want := []SizeCount{{4096, 2, 8192}, {512, 10, 5120}, {2048, 1, 2048}, {1024, 1, 1024}, {16, 3, 48}}
	if !slices.Equal(sizes, want) {
		t.Fatalf("labelSizes = %+v, want %+v", sizes, want)
	}
	code := goTypeSnippet([]TypeTrial{{Type: "uint8", Into: "pool", Sizes: sizes}})
	for _, line := range []string{
		"buf4096, err := pool.New(4096) // []byte of 4096 B: 2 allocations, 50% of the type's bytes",
		"// b, err := buf4096.Alloc() instead of make([]byte, 4096); buf4096.Free(b) where the program drops it",
		"buf512, err := pool.New(512)",
		"buf2048, err := pool.New(2048)",
		"buf1024, err := pool.New(1024)",
		"// 1 other size (0% of the bytes) stay with make",
	} {
		if !strings.Contains(code, line) {
			t.Errorf("the code lacks %q:\n%s", line, code)
		}
	}
	if strings.Contains(code, "pool.New(16)") {
		t.Errorf("a fifth size got a pool:\n%s", code)
	}
}

// TestHeapSnippet: a type moved into a heap gets one heap, its Close,
// and how to allocate and free with it.
func TestHeapSnippet(t *testing.T) {
	for _, tc := range []struct {
		trial TypeTrial
		want  []string
	}{
		{TypeTrial{Type: "uint8", Into: "heap"}, []string{
			"bufs, err := heap.New() // []byte of every size in one carve heap",
			"defer bufs.Close()",
			"// b, err := bufs.Alloc(n, 1) instead of make([]byte, n); bufs.Free(b) where the program drops b, and before it replaces it",
		}},
		{TypeTrial{Type: "main.point", Into: "heap"}, []string{
			"points, err := heap.New() // point objects of every size in one carve heap (heap.Limit sets its most) // in package main",
			"// b, err := points.Alloc(size, align) for each of them; points.Free(b) where the program drops it",
		}},
	} {
		code := goTypeSnippet([]TypeTrial{tc.trial})
		for _, line := range tc.want {
			if !strings.Contains(code, line) {
				t.Errorf("%s into a heap: the code lacks %q:\n%s", tc.trial.Type, line, code)
			}
		}
	}
}
