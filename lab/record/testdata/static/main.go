// Command static is a Go program built without cgo for the tests: a
// statically linked binary that never calls the C library's malloc.
package main

import "fmt"

func main() {
	s := make([]string, 0, 100)
	for i := range 100 {
		s = append(s, fmt.Sprint(i))
	}
	fmt.Println(len(s))
}
