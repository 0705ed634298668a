package trace_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"strconv"
	"strings"

	"github.com/carvelab/carve/lab/trace"
)

// Converting a recording to carve's native format: the format is
// detected, addresses become object IDs in order of birth, and the
// realloc keeps its object's ID although the block moved.
func Example() {
	valgrind := `==4711== Memcheck, a memory error detector
--4711-- malloc(16) = 0x4A40040
--4711-- calloc(3,8) = 0x4A40090
--4711-- realloc(0x4A40040,4000) = 0x4A40160
--4711-- memalign(al 64, size 100) = 0x4A41180
--4711-- free(0x4A40090)
--4711-- free(0x4A40160)
--4711-- free(0x0)
`
	r, err := trace.NewReader(strings.NewReader(valgrind), "prog.log", trace.Auto)
	if err != nil {
		log.Fatal(err)
	}
	w := trace.NewWriter(os.Stdout)
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		w.Write(e)
	}
	w.Flush()
	st := r.Stats()
	fmt.Printf("%s: %v, %d events, %d free(NULL) dropped\n", r.Name(), r.Format(), st.Events, st.NullFrees)
	// Output:
	// # carve trace v1
	// a 1 16
	// c 2 3 8
	// r 1 4000
	// m 3 64 100
	// f 2
	// f 1
	// prog.log: valgrind, 6 events, 1 free(NULL) dropped
}

// A malformed line stops the reader with an *Error that says where and
// what was expected.
func ExampleError() {
	aosp := "202: malloc 0xb4827400 1024\n202: malloc 0xb4827400\n"
	r, err := trace.NewReader(strings.NewReader(aosp), "systemui.txt", trace.AOSP)
	if err != nil {
		log.Fatal(err)
	}
	for err == nil {
		_, err = r.Next()
	}
	var e *trace.Error
	if errors.As(err, &e) {
		fmt.Println(e.File, e.Line, e.What)
		fmt.Println(err)
	}
	// Output:
	// systemui.txt 2 malloc
	// systemui.txt:2: malloc: want "<tid>: malloc <ptr> <size> [<start ns> <end ns>] [@<stack>]", got "202: malloc 0xb4827400"
}

// The block-allocator article's connection scenario, three connections small: three scratch
// buffers and sessions back to back, the scratch buffers freed, then new
// buffers of 4 KiB that cannot fit in the 1 KiB holes.
func ExampleGenerator_Generate() {
	g, ok := trace.Lookup("connection")
	if !ok {
		log.Fatal("no connection generator")
	}
	args, err := g.ParseArgs([]string{"n=3", "next=4096"})
	if err != nil {
		log.Fatal(err)
	}
	w := trace.NewWriter(os.Stdout)
	if err := g.Generate(w, args); err != nil {
		log.Fatal(err)
	}
	w.Flush()
	// Output:
	// # carve trace v1
	// a 1 1024
	// a 2 64
	// a 3 1024
	// a 4 64
	// a 5 1024
	// a 6 64
	// f 1
	// f 3
	// f 5
	// a 7 4096
	// a 8 4096
	// a 9 4096
}

// The generators and their parameters, as carve gen lists them.
func ExampleGenerators() {
	for _, g := range trace.Generators() {
		fmt.Printf("%s:", g.Name)
		for _, p := range g.Params {
			fmt.Printf(" %s=%s", p.Name, strconv.FormatFloat(p.Default, 'f', -1, 64))
		}
		fmt.Println()
	}
	// Output:
	// bump: n=5000000 size=36 free=1
	// carving: smalls=1 n=100000 scratch=1024 session=64 small=200
	// connection: next=1024 n=100000 scratch=1024 session=64
	// phases: seed=1 phases=4 n=50000 size=32 growth=2 keep=0.05 life=1000
	// randfree: seed=1 n=100000 min=4096 max=65536 frac=0.9
	// zipf: seed=1 n=1000000 s=1.2 min=8 max=65536 spike=520 p=0.2 life=10000
}

// Summarizing a trace: what it asks of an allocator, and Robson's worst
// cases for its peak and size range.
func ExampleSummarize() {
	r, err := trace.Open("testdata/gen/carving-smalls1.trace")
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	s, err := trace.Summarize(r)
	if err != nil {
		log.Fatal(err)
	}
	ff, bf := s.Robson()
	fmt.Printf("%d events: %d allocs, %d frees\n", s.Events, s.Ops[trace.Alloc], s.Ops[trace.Free])
	fmt.Printf("peak live %d bytes in %d objects; requests from %d to %d bytes\n", s.PeakLive, s.PeakObjects, s.Smallest, s.Largest)
	fmt.Printf("Robson: first fit up to %.0f bytes, best fit up to %.0f\n", ff, bf)
	// Output:
	// 15 events: 12 allocs, 3 frees
	// peak live 3864 bytes in 9 objects; requests from 64 to 1024 bytes
	// Robson: first fit up to 15456 bytes, best fit up to 61824
}

// A trace whose objects carry labels, written in version 2 of the native
// format, read back and summarized by label.
func ExampleSummary_WriteLabels() {
	var labels trace.Labels
	session, _ := labels.Intern(trace.Label{Name: "main.session", Attrs: []trace.Attr{{Key: trace.AttrSize, Value: "64"}, {Key: trace.AttrPtrBytes, Value: "0"}}})
	buffer, _ := labels.Intern(trace.Label{Name: "uint8", Attrs: []trace.Attr{{Key: trace.AttrSize, Value: "1"}, {Key: trace.AttrPtrBytes, Value: "0"}}})
	var text bytes.Buffer
	w := trace.NewWriter(&text)
	w.SetLabels(&labels)
	for i := uint64(1); i <= 4; i++ {
		w.Write(trace.Event{Op: trace.Alloc, ID: 2 * i, Size: 64, Label: session})
		w.Write(trace.Event{Op: trace.Alloc, ID: 2*i + 1, Size: 1024, Label: buffer})
	}
	w.Write(trace.Event{Op: trace.Free, ID: 3})
	w.Flush()
	fmt.Print(text.String()[:strings.Index(text.String(), "a 4")])

	r, _ := trace.NewReader(&text, "labels.trace", trace.Auto)
	s, _ := trace.Summarize(r)
	s.WriteLabels(os.Stdout, 0)
	// Output:
	// # carve trace v3
	// l 1 main.session ptrbytes=0 size=64
	// a 2 64 @1
	// l 2 uint8 ptrbytes=0 size=1
	// a 3 1024 @2
	//   bytes at peak  share  objects  own peak  allocs  mean life  ptr bytes  size  label
	//        4.00 KiB  94.1%        4  4.00 KiB       4          7          0     1  []byte
	//           256 B   5.9%        4     256 B       4          -          0    64  main.session
}
