// Package summary describes a trace as a whole, before any allocator runs
// it. [Of] reads a trace and describes it ([Trace]): counts, request
// sizes, peak live bytes and objects, lifetimes, and Robson's worst-case
// bounds on the heap that its peak and size range could force
// ([Trace.Robson]). For a labelled trace it also gives a table of its
// labels (for a Go trace, its types) by their bytes live at the trace's
// peak ([LabelStat], [Trace.WriteLabels]), and of its sites, each by its
// Go name ([LabelStat.GoName]: a uint8 label of objects of many bytes is
// a []byte); [FindLabel] finds one by either name.
//
// The event model and the formats the traces are read from are package
// trace's.
package summary
