//go:build ignore

// mkclasses generates classes.go, the size-class table of package
// sizeclass:
//
//	go generate ./sizeclass    (runs: go run mkclasses.go -output classes.go)
//
// # Choosing the classes
//
// A request is rounded up to the smallest class that holds it; the bytes
// between the request and the class size are internal waste. Classes are
// spaced so that the worst case, the smallest request that maps to a
// class, wastes at most one eighth of the chunk:
//
//	size < 128:             every multiple of 8 (8, 16, ..., 128)
//	2^k <= size < 2^(k+1):  steps of 2^k / 8    (144, 160, ..., 256, 288, ...)
//
// up to 32 KiB. A step of size/8 keeps the waste of the first class of
// each octave at (step-1)/(2^k+step) < 1/9; below 128 bytes the step
// cannot shrink under 8 (the pool's smallest chunk and alignment), so
// classes up to 48 bytes waste more (7 bytes of a 56-byte chunk is the
// 12.5% mark). Unlike the Go runtime, the generator merges no classes:
// merging two classes that fit the same number of chunks in a slab costs
// no footprint but breaks the 12.5% bound.
//
// # Slabs
//
// Each class is one pool.Pool, which commits memory in slabs: 64 KiB,
// doubled until the slab holds at least 8 chunks (the pool's own rule for
// its default slab size). A slab of at least 8 chunks wastes less than one
// chunk at its tail, so less than 1/8 of the slab.
//
// # Alignment
//
// Pools are page-aligned and slabs are powers of two, so every chunk of a
// class of size s is aligned to the largest power of two dividing s, up to
// the 4 KiB page: the class's alignment. A request for a larger alignment
// than its class has moves up to the next class that has it.
//
// The comment table printed into classes.go lists, per class: its size,
// the bytes of a slab, the chunks a slab holds, the bytes left at the
// slab's tail, the worst internal waste (of the chunk) and the worst waste
// counting the tail (of the slab, as the Go runtime's table does), and the
// class's alignment.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"io"
	"log"
	"math/bits"
	"os"
)

const (
	minSize      = 8        // pool.LinkSize: a free chunk holds an 8-byte link
	maxSmallSize = 32 << 10 // the largest class; larger requests are large objects
	smallSizeMax = 1024     // sizes up to here are looked up in steps of smallSizeDiv
	smallSizeDiv = 8
	largeSizeDiv = 128 // and above it in steps of largeSizeDiv
	maxAlign     = 4096
	slabMin      = 64 << 10 // pool's default slab size
	slabChunks   = 8        // pool's least number of chunks per slab
	wasteBound   = 0.125
)

type class struct {
	size int
	slab int
}

func (c class) objects() int { return c.slab / c.size }
func (c class) tail() int    { return c.slab - c.objects()*c.size }
func (c class) align() int   { return min(1<<bits.TrailingZeros(uint(c.size)), maxAlign) }

func makeClasses() []class {
	classes := []class{{}} // class 0: no class
	for size := minSize; size <= maxSmallSize; {
		slab := slabMin
		for slab/size < slabChunks {
			slab *= 2
		}
		classes = append(classes, class{size: size, slab: slab})
		size += max(minSize, (1<<(bits.Len(uint(size))-1))/8)
	}
	return classes
}

// validate checks what the heap relies on.
func validate(classes []class) {
	for i, c := range classes[1:] {
		prev := classes[i]
		waste := float64(c.size-prev.size-1) / float64(c.size)
		switch {
		case c.size <= prev.size:
			log.Fatalf("class %d: size %d not above %d", i+1, c.size, prev.size)
		case c.size > smallSizeMax && c.size%largeSizeDiv != 0,
			c.size <= smallSizeMax && c.size%smallSizeDiv != 0:
			log.Fatalf("class %d: size %d not a multiple of its lookup step", i+1, c.size)
		case c.size > 56 && waste > wasteBound:
			log.Fatalf("class %d: size %d wastes %.2f%% > %.1f%%", i+1, c.size, 100*waste, 100*wasteBound)
		case float64(c.tail()) >= wasteBound*float64(c.slab):
			log.Fatalf("class %d: slab tail %d of %d", i+1, c.tail(), c.slab)
		}
	}
	if len(classes) > 256 {
		log.Fatalf("%d classes do not fit the uint8 lookup tables", len(classes))
	}
	if classes[len(classes)-1].size != maxSmallSize || classes[len(classes)-1].align() != maxAlign {
		log.Fatalf("the largest class must be %d bytes and %d-aligned", maxSmallSize, maxAlign)
	}
}

func printComment(w io.Writer, classes []class) {
	fmt.Fprintf(w, "// %-5s  %-9s  %-10s  %-7s  %-10s  %-9s  %-10s  %-9s\n",
		"class", "bytes/obj", "bytes/slab", "objects", "tail waste", "max waste", "with tail", "min align")
	worst, worstAt := 0.0, 0
	for i, c := range classes[1:] {
		prev := classes[i].size
		internal := float64(c.size-prev-1) / float64(c.size)
		withTail := float64((c.size-prev-1)*c.objects()+c.tail()) / float64(c.slab)
		if c.size > 56 && internal > worst {
			worst, worstAt = internal, c.size
		}
		fmt.Fprintf(w, "// %5d  %9d  %10d  %7d  %10d  %8.2f%%  %9.2f%%  %9d\n",
			i+1, c.size, c.slab, c.objects(), c.tail(), 100*internal, 100*withTail, c.align())
	}
	fmt.Fprintf(w, "//\n")
	fmt.Fprintf(w, "// %d classes from %d to %d bytes. max waste: the smallest request of the\n", len(classes)-1, minSize, maxSmallSize)
	fmt.Fprintf(w, "// class, rounded up to the class size, as a share of the chunk; at most\n")
	fmt.Fprintf(w, "// %.2f%% (class %d) for requests over 48 bytes. with tail: the same\n", 100*worst, worstAt)
	fmt.Fprintf(w, "// over a slab full of such requests, its tail included. Slab sizes assume\n")
	fmt.Fprintf(w, "// pages of at most 64 KiB; the heap uses a page when pages are larger.\n")
	fmt.Fprintf(w, "\n")
}

func printTables(w io.Writer, classes []class) {
	classOf := func(size, align int) int {
		for i, c := range classes[1:] {
			if c.size >= size && c.align() >= align {
				return i + 1
			}
		}
		return 0
	}
	fmt.Fprintln(w, "const (")
	fmt.Fprintf(w, "numClasses = %d // class 0 is no class\n", len(classes))
	fmt.Fprintf(w, "maxSmallSize = %d\n", maxSmallSize)
	fmt.Fprintf(w, "smallSizeDiv = %d\n", smallSizeDiv)
	fmt.Fprintf(w, "smallSizeMax = %d\n", smallSizeMax)
	fmt.Fprintf(w, "largeSizeDiv = %d\n", largeSizeDiv)
	fmt.Fprintf(w, "maxAlignShift = %d\n", bits.TrailingZeros(maxAlign))
	fmt.Fprintln(w, ")")
	fmt.Fprintln(w)

	fmt.Fprintln(w, "// classSize is the chunk size of each class.")
	fmt.Fprint(w, "var classSize = [numClasses]uint32{")
	for _, c := range classes {
		fmt.Fprintf(w, "%d,", c.size)
	}
	fmt.Fprintln(w, "}")
	fmt.Fprintln(w)

	fmt.Fprintln(w, "// classSlab is the bytes each class's pool commits at a time.")
	fmt.Fprint(w, "var classSlab = [numClasses]uint32{")
	for _, c := range classes {
		fmt.Fprintf(w, "%d,", c.slab)
	}
	fmt.Fprintln(w, "}")
	fmt.Fprintln(w)

	fmt.Fprintln(w, "// sizeToClass8[(size+7)/8] is the class of size <= smallSizeMax.")
	fmt.Fprint(w, "var sizeToClass8 = [smallSizeMax/smallSizeDiv + 1]uint8{")
	for i := 0; i <= smallSizeMax/smallSizeDiv; i++ {
		fmt.Fprintf(w, "%d,", classOf(i*smallSizeDiv, 1))
	}
	fmt.Fprintln(w, "}")
	fmt.Fprintln(w)

	fmt.Fprintln(w, "// sizeToClass128[(size-smallSizeMax+127)/128] is the class of a larger size.")
	fmt.Fprint(w, "var sizeToClass128 = [(maxSmallSize-smallSizeMax)/largeSizeDiv + 1]uint8{")
	for i := 0; i <= (maxSmallSize-smallSizeMax)/largeSizeDiv; i++ {
		fmt.Fprintf(w, "%d,", classOf(smallSizeMax+i*largeSizeDiv, 1))
	}
	fmt.Fprintln(w, "}")
	fmt.Fprintln(w)

	fmt.Fprintln(w, "// alignedClass[k][c] is the smallest class from c up whose chunks are")
	fmt.Fprintln(w, "// aligned to 1<<k (0 if none is).")
	fmt.Fprintln(w, "var alignedClass = [maxAlignShift + 1][numClasses]uint8{")
	for k := 0; 1<<k <= maxAlign; k++ {
		fmt.Fprint(w, "{")
		for _, c := range classes {
			fmt.Fprintf(w, "%d,", classOf(c.size, 1<<k))
		}
		fmt.Fprint(w, "},\n")
	}
	fmt.Fprintln(w, "}")
}

func main() {
	out := flag.String("output", "classes.go", "file to write")
	flag.Parse()

	classes := makeClasses()
	validate(classes)

	var b bytes.Buffer
	fmt.Fprintln(&b, "// Code generated by mkclasses.go; DO NOT EDIT.")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "package sizeclass")
	fmt.Fprintln(&b)
	printComment(&b, classes)
	printTables(&b, classes)

	src, err := format.Source(b.Bytes())
	if err != nil {
		log.Fatalf("gofmt: %v\n%s", err, b.Bytes())
	}
	if err := os.WriteFile(*out, src, 0o666); err != nil {
		log.Fatal(err)
	}
}
