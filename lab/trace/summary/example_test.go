package summary_test

import (
	"bytes"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/trace/summary"
)

// Summarizing a trace: what it asks of an allocator, and Robson's worst
// cases for its peak and size range.
func ExampleOf() {
	r, err := trace.Open("../gen/testdata/carving-smalls1.trace")
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	s, err := summary.Of(r)
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
func ExampleTrace_WriteLabels() {
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
	s, _ := summary.Of(r)
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
