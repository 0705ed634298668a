package rows

import (
	"fmt"

	"github.com/carvelab/carve/internal/size"
	"github.com/carvelab/carve/internal/text"
	"github.com/carvelab/carve/lab/replay"
)

// Notes are the lines every format prints under the table of t, each a
// sentence without its full stop: for a Go program's trace, what its
// marked heap is, how the go rows collected and where the frees are; for
// a row whose heap made meshes, what meshing did and how its resident
// memory is measured; for a trace that holds it, the recorded program's own RSS
// and how each go row that collected where the program did stands
// against it.
func (t Table) Notes() []string {
	var notes []string
	var marked int64
	for _, r := range t.Rows {
		marked = max(marked, r.PeakMarked)
	}
	if marked > 0 {
		notes = append(notes, fmt.Sprintf("marked heap: %s at its peak, what the program's collections found reachable; peak live counts the bytes allocated and not yet known dead", size.Format(marked)))
		for _, r := range t.Rows {
			if r.Collected != "" {
				notes = append(notes, fmt.Sprintf("%s collected %s", r.Allocator, collectedHow[r.Collected]))
			}
		}
	}
	if f := t.Trace.Frees().String(); f != "" {
		notes = append(notes, "frees: "+f)
	}
	for _, r := range t.Rows {
		if m := r.Mesh; m != nil && m.Meshes > 0 {
			resident := "its memory file's blocks, each page once however many pages map it"
			if r.Measured == "child" {
				resident = "its process's PSS (Pss_Anon + Pss_Shmem), sampled, with no kernel peak"
			}
			notes = append(notes, fmt.Sprintf("%s: %s made, %s of pages meshed at the end (given back: out of its footprint), %s freed with their slab%s; its resident memory is %s",
				r.Allocator, text.Count(m.Meshes, "mesh"), size.Format(m.Meshed), text.Count(m.Unmeshed, "meshed page"), refusedNote(m.Refused), resident))
		}
	}
	if p := t.Program(); p != nil {
		notes = append(notes, "the program's RSS: "+p.String())
		for _, r := range t.Rows {
			if r.VsProgram != nil {
				notes = append(notes, fmt.Sprintf("%s: %s", r.Allocator, r.VsProgram.Text(p, r)))
			}
		}
	}
	return notes
}

// collectedHow says how the go row collected (Row.Collected).
var collectedHow = map[string]string{
	replay.ByProgram: "where the program did: a full collection at each end of its marks",
	replay.ByPacing:  "as the program's runtime would pace it: the program's marked heap, less the objects moved off it, times how far the program's heap grew over its marked heap in that cycle",
	replay.ByGOGC:    "at GOGC, where its own pacer aims",
}

// refusedNote is the clause of a mesh note for the system calls the
// kernel refused, if any.
func refusedNote(n int64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; the kernel refused %s of meshing", text.Count(n, "system call"))
}
