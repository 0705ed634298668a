package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/carvelab/carve/lab/scenario"
)

// TestScenarioTable walks scenario.Scenarios: each scenario is in carve
// scenario's synopsis and in its help with its doc, is run by its name
// with the flags it reads (and --n's default, its own), refuses the
// flags it does not read, and a misspelling of its name gets it
// suggested. The scenarios' Run are replaced by one that prints the
// Config it got, so that the test checks the dispatch, not the
// experiments (TestScenarios runs those).
func TestScenarioTable(t *testing.T) {
	var help bytes.Buffer
	if code := run([]string{"help", "scenario"}, &help, &help); code != 0 {
		t.Fatalf("carve help scenario: exit %d: %s", code, help.String())
	}
	synopsis, _, _ := strings.Cut(help.String(), "\n")

	saved := scenario.Scenarios
	t.Cleanup(func() { scenario.Scenarios = saved })
	scenario.Scenarios = nil
	for _, s := range saved {
		name := s.Name
		s.Run = func(w io.Writer, c scenario.Config) error {
			_, err := fmt.Fprintf(w, "ran %s: n=%d next=%d pool=%t smalls=%d\n", name, c.N, c.Next, c.FromPool, c.Smalls)
			return err
		}
		scenario.Scenarios = append(scenario.Scenarios, s)
	}

	// A value of each flag that only some scenarios read, other than its
	// default, and what the stub prints for it.
	flags := []struct{ name, value, printed string }{
		{"n", "7", "n=7"}, {"next", "8", "next=8"}, {"from", "pool", "pool=true"}, {"smalls", "0", "smalls=0"},
	}
	for _, s := range scenario.Scenarios {
		t.Run(s.Name, func(t *testing.T) {
			if !strings.Contains(synopsis, s.Name) {
				t.Errorf("the synopsis %q does not name %s", synopsis, s.Name)
			}
			first := strings.Fields(s.Doc)
			if want := fmt.Sprintf("\n%-10s  %s", s.Name, strings.Join(first[:min(4, len(first))], " ")); !strings.Contains(help.String(), want) {
				t.Errorf("carve help scenario does not list %s with its doc (%q):\n%s", s.Name, want, help.String())
			}

			out, code, stderr := runCarve("scenario", s.Name)
			if want := fmt.Sprintf("ran %s: n=%d ", s.Name, s.N); code != 0 || !strings.HasPrefix(out, want) {
				t.Errorf("carve scenario %s: exit %d, %q %q; want %q", s.Name, code, out, stderr, want)
			}
			for _, f := range flags {
				out, code, stderr := runCarve("scenario", s.Name, "--"+f.name, f.value)
				switch {
				case s.Reads(f.name) && (code != 0 || !strings.Contains(out, " "+f.printed)):
					t.Errorf("carve scenario %s --%s %s: exit %d, %q %q; want %s", s.Name, f.name, f.value, code, out, stderr, f.printed)
				case !s.Reads(f.name) && (code != 2 || out != "" || !strings.Contains(stderr, "--"+f.name+": "+s.Name+" does not read it")):
					t.Errorf("carve scenario %s --%s %s: exit %d, %q %q; want exit 2, the flag refused", s.Name, f.name, f.value, code, out, stderr)
				}
			}

			typo := s.Name[:len(s.Name)-1]
			_, code, stderr = runCarve("scenario", typo)
			if want := fmt.Sprintf("did you mean %q?", s.Name); code != 2 || !strings.Contains(stderr, want) || !strings.Contains(stderr, strings.Join(scenario.Names, ", ")) {
				t.Errorf("carve scenario %s: exit %d, %q; want exit 2, %s and every scenario", typo, code, stderr, want)
			}
		})
	}
}

func runCarve(args ...string) (stdout string, code int, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return o.String(), code, e.String()
}
