package trace

import "io"

// A Source gives a trace's events in batches, in order: *Reader is one,
// Events another, and the lab's replayers read any. Read fills dst with
// up to len(dst) events and returns how many; at the end it returns 0 and
// io.EOF, and any other error stops the trace there.
type Source interface {
	Read(dst []Event) (n int, err error)
}

// A Positioned source can say where its events come from: *Reader is one.
// Position returns the file and the line (0 when there is none) of the
// i-th event its last Read returned.
type Positioned interface {
	Source
	Position(i int) (file string, line int64)
}

// Events returns a Source that gives evs, sharing them (the caller must
// not change them while it reads).
func Events(evs []Event) Source { return &sliceSource{evs: evs} }

type sliceSource struct{ evs []Event }

func (s *sliceSource) Read(dst []Event) (int, error) {
	if len(s.evs) == 0 {
		return 0, io.EOF
	}
	n := copy(dst, s.evs)
	s.evs = s.evs[n:]
	return n, nil
}
