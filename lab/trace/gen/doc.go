// Package gen writes synthetic allocation traces: the named generators
// that carve gen runs. [All] lists them (carve help gen prints the list):
// the block-allocator article's scenarios and synthetic workloads with
// explicit seeds, each with documented parameters and defaults
// ([Param]), and the same trace for the same
// arguments on any machine. A [Generator] writes its events to any
// trace.EventWriter (a trace.Writer, a replayer), and names the phases
// of its trace ([Generator.Phases]) where they carry the lesson.
//
// The event model the traces are made of is package trace's.
package gen
