package churn

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// resultPrefix starts a child's line of results on its standard output.
const resultPrefix = "churn-result: "

// RunChild runs the test named test in a new process of the running test
// binary, with env added to its environment, and decodes into res the
// line of results the child printed with PrintResult. The value
// benchmarks measure each store's memory and GC in a process of its own
// this way, so that no store's RSS or Go heap is left over from another's.
func RunChild(test string, env []string, res any) error {
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%s: %v\n%s%s", cmd, err, out, stderr.Bytes())
	}
	for line := range strings.Lines(string(out)) {
		if s, ok := strings.CutPrefix(line, resultPrefix); ok {
			if err := json.Unmarshal([]byte(s), res); err != nil {
				return fmt.Errorf("%s: %v in %q", cmd, err, s)
			}
			return nil
		}
	}
	return fmt.Errorf("%s printed no line starting %q:\n%s%s", cmd, resultPrefix, out, stderr.Bytes())
}

// PrintResult prints res as the child's line of results for RunChild.
func PrintResult(res any) error {
	line, err := json.Marshal(res)
	if err != nil {
		return err
	}
	_, err = fmt.Printf("%s%s\n", resultPrefix, line)
	return err
}
