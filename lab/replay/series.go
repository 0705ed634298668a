package replay

// Point is a stretch of a replay, in the series a Result keeps for charts
// (Options.Series): the largest live memory and footprint of its events
// (so that no peak is lost however many events one point stands for), and
// the largest resident figure of the samples it spans (see Resident).
type Point struct {
	// Event is the number of the stretch's last event, counting from 1.
	Event     int64 `json:"event"`
	Live      int64 `json:"live"`
	Footprint int64 `json:"footprint"`
	// Resident is the largest resident figure sampled in the stretch (or,
	// before the first sample in it, the last one before).
	Resident int64 `json:"resident"`
}

// series keeps at most 2n points for a replay of any length: each point
// covers width readings (an event's for Run, a sample's for RunBatch);
// when the points fill up, neighbours merge in pairs and the width
// doubles. The maxima are kept, so the series shows every peak of live
// memory and footprint at the resolution it has.
type series struct {
	n      int // points wanted; 0: no series
	width  int64
	points []Point
	cur    Point
	in     int64 // events in cur
}

func newSeries(n int) series {
	return series{n: n, width: 1}
}

// add records one event's state.
func (s *series) add(event, live, footprint, resident int64) {
	if s.n == 0 {
		return
	}
	s.cur.Event = event
	s.cur.Live = max(s.cur.Live, live)
	s.cur.Footprint = max(s.cur.Footprint, footprint)
	s.cur.Resident = max(s.cur.Resident, resident)
	if s.in++; s.in < s.width {
		return
	}
	s.points = append(s.points, s.cur)
	s.cur, s.in = Point{}, 0
	if len(s.points) == 2*s.n {
		for i := range s.n {
			a, b := s.points[2*i], s.points[2*i+1]
			s.points[i] = Point{Event: b.Event, Live: max(a.Live, b.Live), Footprint: max(a.Footprint, b.Footprint), Resident: max(a.Resident, b.Resident)}
		}
		s.points = s.points[:s.n]
		s.width *= 2
	}
}

// lift raises the last point's footprint and resident figures to fp and
// resident, for a reading taken after its events ended (the last sample
// of a replay), so that the series still holds every peak.
func (s *series) lift(fp, resident int64) {
	p := &s.cur
	if s.in == 0 {
		if len(s.points) == 0 {
			return
		}
		p = &s.points[len(s.points)-1]
	}
	p.Footprint, p.Resident = max(p.Footprint, fp), max(p.Resident, resident)
}

// done returns the points, the last partial one included.
func (s *series) done() []Point {
	if s.in > 0 {
		s.points = append(s.points, s.cur)
		s.cur, s.in = Point{}, 0
	}
	return s.points
}
