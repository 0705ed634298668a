package record_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/carvelab/carve/lab/record"
)

// Record python3 with carve's recorder (the default). The example is not
// run by go test: it needs a C compiler and python3.
func ExampleRecord() {
	var out bytes.Buffer
	cmd := []string{"python3", "-c", "d = {i: str(i) for i in range(10000)}"}
	opt := record.Options{
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		Env:    []string{"PYTHONMALLOC=malloc"}, // Python's objects from malloc, not pymalloc
	}
	res, err := record.Record(context.Background(), cmd, &out, opt)
	var exit *record.ExitError
	switch {
	case errors.Is(err, record.ErrNoEvents):
		fmt.Println("nothing recorded:", err)
		return
	case errors.As(err, &exit):
		fmt.Println("the program failed, with status", exit.Code) // the trace is in out all the same
	case err != nil:
		fmt.Println(err)
		return
	}
	fmt.Printf("%d events, %d threads, from %s (pid %d)\n", res.Events, res.Threads, res.Process.Program, res.Process.Pid)
	os.WriteFile("python.trace", out.Bytes(), 0o644)
}

func ExampleRecorders() {
	for _, r := range record.Recorders() {
		fmt.Println(r.Name)
	}
	// Output:
	// carve
	// valgrind
	// heaptrack
	// mtrace
	// go
}
