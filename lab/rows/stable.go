package rows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// unstable lists the figures of a row that vary from run to run, which
// ForStable leaves out: each by its key in the row's JSON ("phases[].resident":
// the key resident of each of phases' objects), and how to clear it. The
// timings and the resident memory vary for every row; child marks the
// figures that vary only for a row measured in a process of its own,
// every figure of the allocator's (its footprint, the ratios and
// fragmentation made of it), as a real malloc's or the Go heap's own
// statistics move with timing (jemalloc's decay, the Go collector).
var unstable = []struct {
	key   string
	child bool
	clear func(*Row)
}{
	{"ns_per_op", false, func(r *Row) { r.NsPerOp = 0 }},
	{"off_cpu_ns", false, func(r *Row) { r.OffCPU = 0 }},
	{"peak_resident", false, func(r *Row) { r.PeakResident = 0 }},
	{"peak_rss", false, func(r *Row) { r.PeakRSS = 0 }},
	{"peak_rss_over_peak_live", false, func(r *Row) { r.RSSRatio = 0 }},
	{"peak_rss_over_peak_marked_heap", false, func(r *Row) { r.MarkedRatio = 0 }},
	{"peak_rss_above_baseline", false, func(r *Row) { r.PeakRSSHWM = 0 }},
	{"startup_rss", false, func(r *Row) { r.StartupRSS = 0 }},
	{"vs_program", false, func(r *Row) { r.VsProgram = nil }},
	{"phases[].resident", false, func(r *Row) {
		for i := range r.Phases {
			r.Phases[i].Resident = 0
		}
	}},
	{"series[].resident", false, func(r *Row) {
		for i := range r.Series {
			r.Series[i].Resident = 0
		}
	}},
	{"peak_footprint", true, func(r *Row) { r.PeakFootprint = 0 }},
	{"peak_footprint_at_event", true, func(r *Row) { r.PeakFootprintAt = 0 }},
	{"peak_used", true, func(r *Row) { r.PeakUsed = 0 }},
	{"footprint_at_peak_live", true, func(r *Row) { r.FootprintAtPeakLive = 0 }},
	{"live_at_peak_footprint", true, func(r *Row) { r.LiveAtPeakFootprint = 0 }},
	{"jw1_avg_footprint_over_live", true, func(r *Row) { r.AvgRatio = 0 }},
	{"jw2_footprint_over_live_at_peak_live", true, func(r *Row) { r.RatioAtPeakLive = 0 }},
	{"jw3_footprint_over_live_at_peak_footprint", true, func(r *Row) { r.RatioAtPeakFP = 0 }},
	{"jw4_peak_footprint_over_peak_live", true, func(r *Row) { r.PeakRatio = 0 }},
	{"fragmentation_percent_at_end", true, func(r *Row) { r.Fragmentation = nil }},
	{"internal_at_end", true, func(r *Row) { r.Internal = 0 }},
	{"external_at_end", true, func(r *Row) { r.External = 0 }},
	{"startup_footprint", true, func(r *Row) { r.StartupFootprint = 0 }},
	{"phases[].footprint", true, func(r *Row) {
		for i := range r.Phases {
			r.Phases[i].Footprint = 0
		}
	}},
	{"series[].footprint", true, func(r *Row) {
		for i := range r.Series {
			r.Series[i].Footprint = 0
		}
	}},
	{"routed.idle_at_peak_footprint", true, func(r *Row) {
		if r.Routed != nil {
			routed := *r.Routed // not the caller's
			routed.IdleAtPeakFootprint = 0
			r.Routed = &routed
		}
	}},
}

// ForStable returns the row without the figures that vary from run to
// run (unstable), for output that must be byte-identical for the same
// input: they are zero in the row and absent from its JSON, where a 0
// would read as a measurement. The trace's figures (events, live memory,
// trace errors) stay. Unstable names what was left out, by JSON key. The
// row names no best row and no note on its RSS.
func (rw Row) ForStable() Row {
	rw.Stable, rw.Best, rw.RSSNote = true, false, ""
	rw.Phases, rw.Series = slices.Clone(rw.Phases), slices.Clone(rw.Series) // cleared below, not the caller's
	var out []string
	for _, u := range unstable {
		if u.child && rw.Measured != "child" {
			continue
		}
		u.clear(&rw)
		out = append(out, u.key)
	}
	rw.Unstable = strings.Join(out, ", ")
	return rw
}

// MarshalJSON writes the row as its fields' tags say; a --stable row
// (ForStable) without the keys its Unstable names.
func (rw Row) MarshalJSON() ([]byte, error) {
	type fields Row // Row without this method
	b, err := json.Marshal(fields(rw))
	if err != nil || !rw.Stable {
		return b, err
	}
	return omitKeys(b, strings.Split(rw.Unstable, ", "))
}

// omitKeys returns the JSON object obj without keys, each a key of obj
// ("peak_rss") or of the objects under one of its keys ("phases[].resident"
// of each object of the array phases, "routed.peak_footprint" of the
// object routed).
func omitKeys(obj []byte, keys []string) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(obj))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("rows: omitKeys of no JSON object: %.40q", obj)
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, err
		}
		key := t.(string) // an object's token here is its key
		var val json.RawMessage
		if err := d.Decode(&val); err != nil {
			return nil, err
		}
		if slices.Contains(keys, key) {
			continue
		}
		var under []string
		for _, k := range keys {
			if outer, rest, ok := strings.Cut(k, "."); ok && strings.TrimSuffix(outer, "[]") == key {
				under = append(under, rest)
			}
		}
		if len(under) > 0 {
			if val, err = omitUnder(val, under); err != nil {
				return nil, err
			}
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(val)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// omitUnder returns val, an object or an array of objects (or null),
// without keys in each object.
func omitUnder(val json.RawMessage, keys []string) (json.RawMessage, error) {
	switch {
	case bytes.HasPrefix(val, []byte("{")):
		return omitKeys(val, keys)
	case bytes.HasPrefix(val, []byte("[")):
		var elems []json.RawMessage
		if err := json.Unmarshal(val, &elems); err != nil {
			return nil, err
		}
		for i, e := range elems {
			var err error
			if elems[i], err = omitKeys(e, keys); err != nil {
				return nil, err
			}
		}
		return json.Marshal(elems)
	}
	return val, nil
}
