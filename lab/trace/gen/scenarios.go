package gen

import "github.com/carvelab/carve/lab/trace"

// The block-allocator article's scenarios, and the benchmark of the post
// "Bump Allocator", as traces. Their numbers are the sources' own: 100,000
// connections, 1 KiB scratch buffers, 64-byte sessions, 200-byte small
// objects, 5,000,000 Person structs of 36 bytes.

const (
	maxCount = 1e9     // objects a generator may be asked for
	maxSize  = 1 << 40 // bytes one object may be asked for
)

var connectionGen = Generator{
	Name: "connection",
	Doc: "The block-allocator article's connection scenario: n connections set up one after the other, each " +
		"with a scratch buffer and a session allocated back to back; then every scratch " +
		"buffer is freed, leaving holes between live sessions; then n new buffers of size " +
		"next are allocated. With next the size of the holes (1024) they fit in them; with " +
		"4096 none does, and the heap must grow by about n × next. The trace ends with the " +
		"sessions and the new buffers live, where the article measures.",
	Compare: "The article, on glibc with 100,000 connections: 1 KB next buffers grew the process by 0 MB, 4 KB ones by 392 MB.",
	Params: []Param{
		{Name: "next", Doc: "size of the new buffers, bytes", Default: 1024, Min: 0, Max: maxSize, Int: true},
		{Name: "n", Doc: "connections", Default: 100000, Min: 0, Max: maxCount, Int: true},
		{Name: "scratch", Doc: "size of a scratch buffer, bytes", Default: 1024, Min: 0, Max: maxSize, Int: true},
		{Name: "session", Doc: "size of a session, bytes", Default: 64, Min: 0, Max: maxSize, Int: true},
	},
	gen: func(w trace.EventWriter, a Args) error {
		e := newEmitter(w)
		n := setup(e, a)
		e.allocN(n, uint64(a["next"]))
		return e.err
	},
	phases: func(a Args) []Phase {
		n := int64(a["n"])
		return []Phase{{"setup", 2 * n}, {"scratch freed", 3 * n}, {"next buffers", 4 * n}}
	},
}

// setup allocates n scratch buffers and sessions back to back (scratch
// buffer i gets ID 2i+1, its session 2i+2), then frees every scratch
// buffer, and returns n.
func setup(e *emitter, a Args) int {
	n := int(a["n"])
	for range n {
		e.alloc(uint64(a["scratch"]))
		e.alloc(uint64(a["session"]))
		if e.err != nil {
			return n
		}
	}
	for i := range uint64(n) {
		if e.err != nil {
			break
		}
		e.free(2*i + 1)
	}
	return n
}

var carvingGen = Generator{
	Name: "carving",
	Doc: "The block-allocator article's carving scenario: the connection setup (n scratch buffers and sessions " +
		"back to back), every scratch buffer freed, then, with smalls=1, n small objects, " +
		"then a second wave of n buffers of the scratch size. Without the small objects the " +
		"second wave fits in the holes; with them the small objects settle in the holes " +
		"first and cut them to sizes the wave cannot use. Whether the scratch buffers came " +
		"from malloc or a pool is the replayer's choice, not the trace's.",
	Compare: "The article, on glibc with 100,000 connections: the second wave grew the process by 19 MB with the small objects between the waves, by 0 KB with the buffers in a pool.",
	Params: []Param{
		{Name: "smalls", Doc: "1 to allocate the small objects between the waves, 0 not to", Default: 1, Min: 0, Max: 1, Int: true},
		{Name: "n", Doc: "connections, small objects, and buffers of the second wave", Default: 100000, Min: 0, Max: maxCount, Int: true},
		{Name: "scratch", Doc: "size of a scratch buffer and of a buffer of the second wave, bytes", Default: 1024, Min: 0, Max: maxSize, Int: true},
		{Name: "session", Doc: "size of a session, bytes", Default: 64, Min: 0, Max: maxSize, Int: true},
		{Name: "small", Doc: "size of a small object, bytes", Default: 200, Min: 0, Max: maxSize, Int: true},
	},
	gen: func(w trace.EventWriter, a Args) error {
		e := newEmitter(w)
		n := setup(e, a)
		if a["smalls"] == 1 {
			e.allocN(n, uint64(a["small"]))
		}
		e.allocN(n, uint64(a["scratch"]))
		return e.err
	},
	phases: func(a Args) []Phase {
		n, smalls := int64(a["n"]), int64(a["smalls"])
		return []Phase{{"setup", 2 * n}, {"scratch freed", 3 * n}, {"small objects", (3 + smalls) * n}, {"second wave", (4 + smalls) * n}}
	},
}

var bumpGen = Generator{
	Name: "bump",
	Doc: "The benchmark of the post \"Bump Allocator\": n Person structs (an int and a 32-byte name, 36 bytes) " +
		"allocated one after the other, all live at once; then, with free=1, all freed in " +
		"the order they were allocated, as its malloc loop does.",
	Compare: "The post: the bump allocator about 9.3 times as fast as malloc for 5,000,000 objects.",
	Params: []Param{
		{Name: "n", Doc: "objects", Default: 5000000, Min: 0, Max: maxCount, Int: true},
		{Name: "size", Doc: "size of an object, bytes", Default: 36, Min: 0, Max: maxSize, Int: true},
		{Name: "free", Doc: "1 to free every object at the end, 0 to leave them live", Default: 1, Min: 0, Max: 1, Int: true},
	},
	gen: func(w trace.EventWriter, a Args) error {
		e := newEmitter(w)
		n := int(a["n"])
		e.allocN(n, uint64(a["size"]))
		if a["free"] == 1 {
			for id := uint64(1); id <= uint64(n) && e.err == nil; id++ {
				e.free(id)
			}
		}
		return e.err
	},
	phases: func(a Args) []Phase {
		n := int64(a["n"])
		return []Phase{{"allocate", n}, {"free", n * (1 + int64(a["free"]))}}
	},
}
