package diff

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// ReplaySchemaPrefix starts the schema of a table of rows (carve replay
// --format json: rows.Schema), the input Replays compares.
const ReplaySchemaPrefix = "carve.replay/"

// A Replay is a table of rows as carve replay --format json wrote it:
// the figures carve diff compares of each row.
type Replay struct {
	File   string
	Schema string
	Rows   []ReplayRow
}

// ReplayRow is one row of a Replay: a trace and allocator, and its
// figures (the JSON's own names).
type ReplayRow struct {
	Trace     string `json:"trace"`
	Allocator string `json:"allocator"`
	PeakRSS   int64  `json:"peak_rss"`
	PeakLive  int64  `json:"peak_live"`
	Error     string `json:"error,omitempty"`
}

// IsReplay reports whether the file at path is JSON (its first byte
// other than white space is '{'), which carve diff reads as a table of
// rows; anything else it reads as a trace. A path that is not a
// readable file (a shipped trace's name, gen:...) is not a table: the
// trace's reader says what is wrong with it.
func IsReplay(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for {
		c, err := r.ReadByte()
		if err != nil {
			return false
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c == '{'
	}
}

// ReadReplay reads the table of rows in the file at path. JSON of
// another schema is an error; so is any that does not parse. Errors name
// the file.
func ReadReplay(path string) (Replay, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Replay{}, err
	}
	var doc struct {
		Schema string      `json:"schema"`
		Rows   []ReplayRow `json:"rows"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		return Replay{}, fmt.Errorf("%s: not JSON carve reads: %v", path, err)
	}
	if !strings.HasPrefix(doc.Schema, ReplaySchemaPrefix) {
		what := "no schema field"
		if doc.Schema != "" {
			what = "schema " + doc.Schema
		}
		return Replay{}, fmt.Errorf("%s: JSON of %s, not a table of rows (%s..., carve replay --format json)", path, what, ReplaySchemaPrefix)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Replay{}, fmt.Errorf("%s: more than one JSON document", path)
	}
	return Replay{File: path, Schema: doc.Schema, Rows: doc.Rows}, nil
}

// The ways Replays matches rows, its MatchedBy.
const (
	ByTraceAndAllocator = "trace and allocator"
	// ByAllocator: each table is of one trace, under two names (a
	// trace recorded before a change and one after).
	ByAllocator = "allocator"
)

// RowDiff is one row of either table, or of both: nil on the side
// without it.
type RowDiff struct {
	Trace     string `json:"trace"`
	Allocator string `json:"allocator"`
	// TraceB is B's trace when the rows matched by allocator alone.
	TraceB string     `json:"trace_b,omitempty"`
	A      *ReplayRow `json:"a"`
	B      *ReplayRow `json:"b"`
	// PeakRSS and PeakLive compare the two rows' figures (nil unless both
	// tables have the row).
	PeakRSS  *Measure `json:"peak_rss,omitempty"`
	PeakLive *Measure `json:"peak_live,omitempty"`
}

// Replays is the comparison of two tables of rows, as carve diff prints
// it and as its JSON is.
type Replays struct {
	Schema    string    `json:"schema"`
	Kind      string    `json:"kind"`
	A         Side      `json:"a"`
	B         Side      `json:"b"`
	MatchedBy string    `json:"matched_by"`
	Rows      []RowDiff `json:"rows"`
}

// CompareReplays matches a's rows (before) with b's (after) by trace and
// allocator, or by allocator alone when each table is of one trace and
// their names differ. Rows come in a's order, then b's rows that a lacks.
func CompareReplays(a, b Replay) Replays {
	d := Replays{Schema: Schema, Kind: KindReplay, MatchedBy: ByTraceAndAllocator,
		A: Side{File: a.File, Schema: a.Schema}, B: Side{File: b.File, Schema: b.Schema}}
	key := func(r ReplayRow) string { return r.Trace + "\x00" + r.Allocator }
	if ta, tb := traceNames(a), traceNames(b); len(ta) == 1 && len(tb) == 1 && ta[0] != tb[0] {
		d.MatchedBy = ByAllocator
		key = func(r ReplayRow) string { return r.Allocator }
	}
	inB := make(map[string]int, len(b.Rows))
	for i, r := range b.Rows {
		if _, ok := inB[key(r)]; !ok {
			inB[key(r)] = i
		}
	}
	used := make([]bool, len(b.Rows))
	for i := range a.Rows {
		ra := &a.Rows[i]
		rd := RowDiff{Trace: ra.Trace, Allocator: ra.Allocator, A: ra}
		if j, ok := inB[key(*ra)]; ok && !used[j] {
			used[j] = true
			rd.B = &b.Rows[j]
			if rd.B.Trace != ra.Trace {
				rd.TraceB = rd.B.Trace
			}
			rss := measure("peak_rss", "peak RSS", "bytes", &ra.PeakRSS, &rd.B.PeakRSS)
			live := measure("peak_live", "peak live", "bytes", &ra.PeakLive, &rd.B.PeakLive)
			rd.PeakRSS, rd.PeakLive = &rss, &live
		}
		d.Rows = append(d.Rows, rd)
	}
	for j := range b.Rows {
		if !used[j] {
			d.Rows = append(d.Rows, RowDiff{Trace: b.Rows[j].Trace, Allocator: b.Rows[j].Allocator, B: &b.Rows[j]})
		}
	}
	return d
}

// traceNames returns the traces of r's rows, each once, in order.
func traceNames(r Replay) []string {
	var names []string
	for _, row := range r.Rows {
		if !slices.Contains(names, row.Trace) {
			names = append(names, row.Trace)
		}
	}
	return names
}
