//go:build ignore

// mkgoclasses writes the Go runtime's heap size classes, read from a Go
// toolchain's source, as a table of package trace: the file
// goclasses_go1NN.go for the release 1.NN of the toolchain. The Go
// importer sizes each object from the class of the span that holds it
// (see gotrace.go), with the table of the release that wrote the trace.
//
//	go run mkgoclasses.go [-goroot DIR] [-o FILE]
//
// -goroot defaults to the running toolchain's (go env GOROOT). The size
// classes are read from src/internal/runtime/gc/sizeclasses.go (where Go
// 1.26 has them) or src/runtime/sizeclasses.go (older releases), the
// trace format the release writes from src/internal/trace/version, and
// the release from the VERSION file.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("mkgoclasses: ")
	goroot := flag.String("goroot", "", "the Go toolchain's root (default: go env GOROOT)")
	out := flag.String("o", "", "the file to write (default: goclasses_go1NN.go for the toolchain's release)")
	flag.Parse()
	if *goroot == "" {
		b, err := exec.Command("go", "env", "GOROOT").Output()
		if err != nil {
			log.Fatalf("go env GOROOT: %v", err)
		}
		*goroot = strings.TrimSpace(string(b))
	}
	t, err := read(*goroot)
	if err != nil {
		log.Fatal(err)
	}
	if *out == "" {
		*out = fmt.Sprintf("goclasses_go1%d.go", t.minor)
	}
	src, err := format.Source(t.generate())
	if err != nil {
		log.Fatalf("formatting the table: %v", err)
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil {
		log.Fatal(err)
	}
}

// table is what is read from a toolchain.
type table struct {
	minor     int    // the release is Go 1.minor
	source    string // the file the classes came from, under src/
	format    int    // the trace format it writes: go 1.format
	pageShift int
	minAlign  int
	tinySize  int
	tinyClass int
	size      []int // bytes per object of each class; class 0 is large
	npages    []int // pages per span of each class
}

// The names of the constants and tables in each layout of the source.
var layouts = []struct {
	file                                     string
	pageShift, minAlign, tinySize, tinyClass string
	size, npages                             string
	defaultMinAlign                          int // when the file has no such constant
}{
	{"internal/runtime/gc/sizeclasses.go", "PageShift", "MinHeapAlign", "TinySize", "TinySizeClass",
		"SizeClassToSize", "SizeClassToNPages", 0},
	{"runtime/sizeclasses.go", "_PageShift", "minHeapAlign", "_TinySize", "_TinySizeClass",
		"class_to_size", "class_to_allocnpages", 8},
}

func read(goroot string) (*table, error) {
	version, err := os.ReadFile(filepath.Join(goroot, "VERSION"))
	if err != nil {
		return nil, fmt.Errorf("the toolchain's release: %v", err)
	}
	m := regexp.MustCompile(`^go1\.(\d+)`).FindSubmatch(version)
	if m == nil {
		return nil, fmt.Errorf("%s/VERSION: want go1.N..., got %q", goroot, firstLine(version))
	}
	t := &table{}
	t.minor, _ = strconv.Atoi(string(m[1]))

	if t.format, err = traceFormat(goroot); err != nil {
		return nil, err
	}
	for _, l := range layouts {
		path := filepath.Join(goroot, "src", l.file)
		if _, err := os.Stat(path); err != nil {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return nil, err
		}
		t.source = l.file
		ints := map[string]*int{l.pageShift: &t.pageShift, l.minAlign: &t.minAlign, l.tinySize: &t.tinySize, l.tinyClass: &t.tinyClass}
		lists := map[string]*[]int{l.size: &t.size, l.npages: &t.npages}
		t.minAlign = -1
		if err := values(f, ints, lists); err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		if t.minAlign == -1 {
			if l.defaultMinAlign == 0 {
				return nil, fmt.Errorf("%s: no constant %s", path, l.minAlign)
			}
			t.minAlign = l.defaultMinAlign
		}
		for name, p := range ints {
			if *p <= 0 {
				return nil, fmt.Errorf("%s: no constant %s", path, name)
			}
		}
		if len(t.size) == 0 || len(t.size) != len(t.npages) {
			return nil, fmt.Errorf("%s: tables %s and %s: %d and %d classes", path, l.size, l.npages, len(t.size), len(t.npages))
		}
		return t, nil
	}
	return nil, fmt.Errorf("%s: no size classes in src/%s or src/%s", goroot, layouts[0].file, layouts[1].file)
}

// traceFormat reads the trace format the toolchain writes, its constant
// Current = Go1NN.
func traceFormat(goroot string) (int, error) {
	path := filepath.Join(goroot, "src", "internal", "trace", "version", "version.go")
	src, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("the trace format the toolchain writes: %v", err)
	}
	m := regexp.MustCompile(`(?m)^\s*Current\s*=\s*Go1(\d+)\b`).FindSubmatch(src)
	if m == nil {
		return 0, fmt.Errorf("%s: no constant Current = Go1NN", path)
	}
	return strconv.Atoi(string(m[1]))
}

// values fills ints with the integer constants and lists with the integer
// array variables of the same names in f.
func values(f *ast.File, ints map[string]*int, lists map[string]*[]int) error {
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || (g.Tok != token.CONST && g.Tok != token.VAR) {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			for i, name := range v.Names {
				if i >= len(v.Values) {
					continue
				}
				if p, ok := ints[name.Name]; ok {
					n, err := intLit(v.Values[i])
					if err != nil {
						return fmt.Errorf("%s: %v", name.Name, err)
					}
					*p = n
				}
				if p, ok := lists[name.Name]; ok {
					c, ok := v.Values[i].(*ast.CompositeLit)
					if !ok {
						return fmt.Errorf("%s: not an array literal", name.Name)
					}
					for _, e := range c.Elts {
						n, err := intLit(e)
						if err != nil {
							return fmt.Errorf("%s: %v", name.Name, err)
						}
						*p = append(*p, n)
					}
				}
			}
		}
	}
	return nil
}

func intLit(e ast.Expr) (int, error) {
	if c, ok := e.(*ast.CallExpr); ok && len(c.Args) == 1 { // a conversion: int8(2)
		return intLit(c.Args[0])
	}
	b, ok := e.(*ast.BasicLit)
	if !ok || b.Kind != token.INT {
		return 0, fmt.Errorf("want an integer literal, got %T", e)
	}
	n, err := strconv.ParseInt(b.Value, 0, 64)
	return int(n), err
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	return s
}

func (t *table) generate() []byte {
	var b bytes.Buffer
	name := fmt.Sprintf("goClassesGo1%d", t.minor)
	fmt.Fprintf(&b, "// Code generated by mkgoclasses.go from Go 1.%d's src/%s; DO NOT EDIT.\n\n", t.minor, t.source)
	fmt.Fprintf(&b, "package trace\n\n")
	fmt.Fprintf(&b, "// %s is the heap's size classes in Go 1.%d, which writes execution\n", name, t.minor)
	fmt.Fprintf(&b, "// traces of format \"go 1.%d trace\". Class 0 holds the large objects,\n", t.format)
	fmt.Fprintf(&b, "// one a span of as many pages as they need.\n//\n")
	fmt.Fprintf(&b, "//\tclass  bytes/obj  bytes/span  objects  tail waste\n")
	page := 1 << t.pageShift
	for c := 1; c < len(t.size); c++ {
		span := t.npages[c] * page
		fmt.Fprintf(&b, "//\t%5d  %9d  %10d  %7d  %10d\n", c, t.size[c], span, span/t.size[c], span%t.size[c])
	}
	fmt.Fprintf(&b, "var %s = goClasses{\n", name)
	fmt.Fprintf(&b, "release: \"go1.%d\",\n", t.minor)
	fmt.Fprintf(&b, "format: %d,\n", t.format)
	fmt.Fprintf(&b, "pageSize: %d,\n", page)
	fmt.Fprintf(&b, "minAlign: %d,\n", t.minAlign)
	fmt.Fprintf(&b, "tinySize: %d,\n", t.tinySize)
	fmt.Fprintf(&b, "tinyClass: %d,\n", t.tinyClass)
	fmt.Fprintf(&b, "size: []uint32{%s},\n", join(t.size))
	fmt.Fprintf(&b, "npages: []uint8{%s},\n", join(t.npages))
	fmt.Fprintf(&b, "}\n")
	return b.Bytes()
}

func join(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}
