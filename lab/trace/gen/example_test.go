package gen_test

import (
	"fmt"
	"log"
	"os"
	"strconv"

	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/trace/gen"
)

// The block-allocator article's connection scenario, three connections small: three scratch
// buffers and sessions back to back, the scratch buffers freed, then new
// buffers of 4 KiB that cannot fit in the 1 KiB holes.
func ExampleGenerator_Generate() {
	g, ok := gen.Lookup("connection")
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
func ExampleAll() {
	for _, g := range gen.All() {
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
