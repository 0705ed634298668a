package traces_test

import (
	"compress/gzip"
	"fmt"
	"io"
	"log"
	"strings"
	"testing"

	"github.com/carvelab/carve/internal/text"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/traces"
)

// Every shipped trace is a readable gzip stream with its notice, and has
// as many events as its About says.
func TestShipped(t *testing.T) {
	if len(traces.All()) == 0 {
		t.Fatal("no shipped traces")
	}
	for _, tr := range traces.All() {
		if got, ok := traces.Lookup(tr.Name); !ok || got.File != tr.File {
			t.Errorf("Lookup(%q) = %v, %v", tr.Name, got.File, ok)
		}
		if !strings.Contains(tr.Notice, "Apache License") {
			t.Errorf("%s: notice lacks the license text", tr.Name)
		}
		z, err := gzip.NewReader(tr.Open())
		if err != nil {
			t.Fatalf("%s: %v", tr.Name, err)
		}
		n, err := io.Copy(io.Discard, z)
		if err != nil || n == 0 {
			t.Fatalf("%s: decompressed %d bytes, %v", tr.Name, n, err)
		}
		r, err := trace.NewReader(tr.Open(), tr.File, trace.Auto)
		if err != nil {
			t.Fatal(err)
		}
		var events int64
		for {
			if _, err := r.Next(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", tr.Name, err)
			}
			events++
		}
		r.Close()
		if want := text.Thousands(events) + " events"; !strings.Contains(tr.About, want) {
			t.Errorf("%s: About %q, want it to say %s", tr.Name, tr.About, want)
		}
	}
	if _, ok := traces.Lookup("no such trace"); ok {
		t.Error("Lookup of an unknown name succeeded")
	}
}

// A shipped trace reads like a file: trace.NewReader detects the
// compression and the format.
func ExampleLookup() {
	t, _ := traces.Lookup("aosp-systemui")
	r, err := trace.NewReader(t.Open(), t.File, trace.Auto)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	first, _ := r.Next()
	fmt.Printf("%s: %s format, first event %v\n", t.Name, r.Format(), first)
	// Output:
	// aosp-systemui: aosp format, first event a 1 1024
}
