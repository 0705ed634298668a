package trace

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// records is a heaptrack file of allocation records and nothing else,
// made as it is read: "a 1 1" n times after the header.
type records struct {
	head string
	n    int
	part int // bytes of the current line given
}

func (r *records) Read(p []byte) (int, error) {
	k := 0
	for k < len(p) {
		if r.head != "" {
			c := copy(p[k:], r.head)
			r.head, k = r.head[c:], k+c
			continue
		}
		if r.n == 0 {
			break
		}
		const line = "a 1 1\n"
		c := copy(p[k:], line[r.part:])
		k, r.part = k+c, r.part+c
		if r.part == len(line) {
			r.part, r.n = 0, r.n-1
		}
	}
	if k == 0 {
		return 0, io.EOF
	}
	return k, nil
}

// TestHeaptrackRecordsBound: past MaxInfos allocation records the
// Reader stops with an error that names them (not "live objects") and
// still matches ErrTooManyLive.
func TestHeaptrackRecordsBound(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 2^24 records")
	}
	r, err := NewReader(&records{head: "v 10400 3\nX ./prog\n", n: MaxInfos + 1}, "bomb", Heaptrack)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Next()
	if err == nil || !errors.Is(err, ErrTooManyLive) || !strings.Contains(err.Error(), "too many allocation records") || strings.Contains(err.Error(), "live objects") {
		t.Errorf("past MaxInfos records: %v, want an error naming the allocation records", err)
	}
}
