package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestWriteHistogram: a histogram of carve stats prints every bucket from
// the first that counts to the last, each labelled with the range of
// values it counts, and no line wider than statsWidth.
func TestWriteHistogram(t *testing.T) {
	for _, tc := range []struct {
		name    string
		buckets map[int]int64
		want    string
	}{
		{"none", nil, "  none\n"},
		{"a gap, no 0-byte bucket", map[int]int64{7: 1000, 11: 2000}, `
  bytes          requests   share
     64 -   127     1,000   33.3%  ####################
    128 -   255         0    0.0%
    256 -   511         0    0.0%
    512 - 1,023         0    0.0%
  1,024 - 2,047     2,000   66.7%  ########################################
`},
		{"the 0-byte bucket and single values", map[int]int64{0: 1, 1: 2, 2: 1000000}, `
  bytes   requests   share
  0              1   <0.1%  #
  1              2   <0.1%  #
  2 - 3  1,000,000  100.0%  ########################################
`},
		{"the last bucket", map[int]int64{63: 1, 64: 1}, `
  bytes                                                   requests   share
  4,611,686,018,427,387,904 -  9,223,372,036,854,775,807         1   50.0%  ########################
  9,223,372,036,854,775,808 - 18,446,744,073,709,551,615         1   50.0%  ########################
`},
	} {
		var h [65]int64
		for k, n := range tc.buckets {
			h[k] = n
		}
		var b bytes.Buffer
		writeHistogram(&b, "bytes", "requests", &h)
		if got, want := b.String(), strings.TrimPrefix(tc.want, "\n"); got != want {
			t.Errorf("%s: writeHistogram printed\n%s\nwant\n%s", tc.name, got, want)
		}
		for _, l := range strings.Split(b.String(), "\n") {
			if len(l) > statsWidth {
				t.Errorf("%s: a line of %d characters, want at most %d: %s", tc.name, len(l), statsWidth, l)
			}
		}
	}
}
