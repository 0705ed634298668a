//go:build !unix

package lockfree_test

import "testing"

// reportCPU reports nothing where getrusage is missing.
func reportCPU(*testing.B) func() { return func() {} }
