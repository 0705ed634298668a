package arena_test

import (
	"bytes"
	"errors"
	"fmt"
	"log"
	"unsafe"

	"github.com/carvelab/carve/arena"
)

// Person is the struct of the bump allocator post: 36 bytes, no pointers.
type Person struct {
	ID   int32
	Name [32]byte
}

// The bump allocator post's example: an int and a Person from one arena,
// all given back at once by Reset.
func Example() {
	a, err := arena.New()
	if err != nil {
		log.Fatal(err)
	}
	defer a.Release()

	ints, err := arena.NewOf[int](a)
	if err != nil {
		log.Fatal(err)
	}
	people, err := arena.NewOf[Person](a)
	if err != nil {
		log.Fatal(err)
	}

	num, err := ints.New()
	if err != nil {
		log.Fatal(err)
	}
	*num = 42

	user, err := people.New()
	if err != nil {
		log.Fatal(err)
	}
	user.ID = 101
	copy(user.Name[:], "ABCxyz")

	name, _, _ := bytes.Cut(user.Name[:], []byte{0})
	fmt.Println("int variable:", *num)
	fmt.Printf("user id: %d, name: %s\n", user.ID, name)

	a.Reset() // num and user are invalid from here on
	// Output:
	// int variable: 42
	// user id: 101, name: ABCxyz
}

// Alloc hands out raw bytes at any power-of-two alignment, here a 64-byte
// cache line, whatever was allocated before.
func ExampleArena_Alloc() {
	var a arena.Arena // the zero Arena is ready to use
	defer a.Release()

	if _, err := a.Alloc(3, 1); err != nil {
		log.Fatal(err)
	}
	line, err := a.Alloc(100, 64)
	if err != nil {
		log.Fatal(err)
	}
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(line)))
	fmt.Printf("len %d, cap %d, address %% 64 = %d\n", len(line), cap(line), addr%64)

	s := a.Stats()
	fmt.Printf("live %d, used %d, padding %d\n", s.Live, s.Used, s.AlignWaste)

	_, err = a.Alloc(10, 3)
	fmt.Println(err)
	// Output:
	// len 100, cap 100, address % 64 = 0
	// live 103, used 164, padding 61
	// arena: bad alignment: Alloc(10, 3): want a power of two from 1 to 1073741824
}

// MakeSlice allocates zeroed slices of a pointer-free type; NewOf refuses
// types that hold Go pointers and names the field.
func ExampleOf_MakeSlice() {
	var a arena.Arena
	defer a.Release()

	type point struct{ X, Y float64 }
	points, err := arena.NewOf[point](&a)
	if err != nil {
		log.Fatal(err)
	}
	ps, err := points.MakeSlice(3)
	if err != nil {
		log.Fatal(err)
	}
	ps[2] = point{1.5, -2}
	fmt.Println(len(ps), cap(ps), ps)

	type node struct {
		Key  int
		Next *node
	}
	_, err = arena.NewOf[node](&a)
	fmt.Println(errors.Is(err, arena.ErrPointers))
	fmt.Println(err)
	// Output:
	// 3 3 [{0 0} {0 0} {1.5 -2}]
	// true
	// arena.NewOf[arena_test.node]: type holds Go pointers, which the garbage collector cannot see in carve memory: node.Next is a pointer (*arena_test.node)
}
