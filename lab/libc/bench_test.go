package libc_test

import (
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"sync"
	"testing"

	"github.com/carvelab/carve/lab/libc"
	"github.com/carvelab/carve/lab/libc/internal/cloop"
	"github.com/carvelab/carve/lab/trace"
	"github.com/carvelab/carve/lab/traces"
)

// systemui is the shipped trace decoded into ops once, its object IDs
// turned into slots (a freed object's slot goes to the next one born).
var systemui = sync.OnceValues(func() ([]libc.Op, error) {
	t, ok := traces.Lookup("aosp-systemui")
	if !ok {
		return nil, errors.New("no shipped trace aosp-systemui")
	}
	r, err := trace.NewReader(t.Open(), t.File, trace.Auto)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return decode(r)
})

// decode turns a trace's events into ops, assigning slots with a free
// list.
func decode(r *trace.Reader) ([]libc.Op, error) {
	var (
		ops   []libc.Op
		slots = map[uint64]uint32{} // live ID -> slot
		idle  []uint32              // slots of freed objects
	)
	slotOf := func(id uint64) uint32 {
		s, ok := slots[id]
		if !ok {
			s = uint32(len(slots) + len(idle))
			if n := len(idle); n > 0 {
				s, idle = idle[n-1], idle[:n-1]
			}
			slots[id] = s
		}
		return s
	}
	for {
		e, err := r.Next()
		if err == io.EOF {
			return ops, nil
		}
		if err != nil {
			return nil, err
		}
		op, ok := libc.OpOf(e, slotOf(e.ID))
		if !ok {
			return nil, fmt.Errorf("event %v: not an allocator call", e)
		}
		if op.Kind == libc.OpFree {
			idle = append(idle, op.Slot)
			delete(slots, e.ID)
		}
		ops = append(ops, op)
	}
}

// BenchmarkLoop replays the shipped trace through the process's malloc
// with libc.Loop, in batches of 4096 ops, and with the plain C loop of
// package cloop over the whole array: the cost of the cgo calls, the slot
// table and the checks is the difference. loop=replayer sends the same
// batches to a C replayer (glibc, in a process of its own), and waits for
// its report after each: the cost of the pipes and of the figures it
// reads after each batch, beside the loop in process. Both write the first byte of
// each new non-empty block (no touch), and both free what is left at the
// end. ns/event is the time per op. Each runs on a thread bound to one
// CPU: see Threads in the package documentation.
func BenchmarkLoop(b *testing.B) {
	if !libc.Available() {
		b.Skip("built without cgo: no C allocator")
	}
	ops, err := systemui()
	if err != nil {
		b.Fatal(err)
	}
	plan, err := cloop.Prepare(ops)
	if err != nil {
		b.Fatal(err)
	}
	// Neither loop is timed while the Go runtime collects and scavenges the
	// decoding's garbage.
	debug.FreeOSMemory()
	const batch = 4096
	replay := func(b *testing.B) {
		l, err := libc.NewLoop(false)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < len(ops); i += batch {
			if _, err := l.Run(ops[i:min(i+batch, len(ops))]); err != nil {
				b.Fatal(err)
			}
		}
		l.Close()
	}
	plain := func(b *testing.B) {
		if _, err := plan.Run(); err != nil {
			b.Fatal(err)
		}
	}
	// The C replayer: the same ops over a pipe to a process of its own,
	// with the frees of the blocks left live at the end, so that every
	// replay starts from the same heap.
	var replayer func(*testing.B)
	var inC int64 // the replayer's own time of its ops
	if libc.ReplayerAvailable() == nil {
		r, err := libc.StartReplayer("", false)
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		all := append(slices.Clip(ops), freesOfLive(ops)...)
		replayer = func(b *testing.B) {
			for i := 0; i < len(all); i += batch {
				rep, err := r.Run(all[i:min(i+batch, len(all))])
				if err != nil {
					b.Fatal(err)
				}
				inC += rep.Nanos
			}
		}
	}
	for _, loop := range []struct {
		name string
		run  func(*testing.B)
	}{{"libc", replay}, {"plain", plain}, {"replayer", replayer}} {
		if loop.run == nil {
			continue
		}
		b.Run("loop="+loop.name, func(b *testing.B) {
			// One thread on one CPU, one set of malloc caches and arena,
			// which one untimed replay brings to the state every timed one
			// starts in.
			pinThread(b)
			loop.run(b)
			inC = 0
			for b.Loop() {
				loop.run(b)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ops)), "ns/event")
			if loop.name == "replayer" {
				b.ReportMetric(float64(inC)/float64(b.N*len(ops)), "C-ns/event")
			}
		})
	}
}

// freesOfLive returns the frees of the slots ops leave holding a block.
func freesOfLive(ops []libc.Op) []libc.Op {
	live := map[uint32]bool{}
	for _, op := range ops {
		live[op.Slot] = op.Kind != libc.OpFree
	}
	var frees []libc.Op
	for slot, ok := range live {
		if ok {
			frees = append(frees, libc.Op{Kind: libc.OpFree, Slot: slot})
		}
	}
	return frees
}
