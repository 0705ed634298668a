package trace_test

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"
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
