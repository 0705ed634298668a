package trace

import (
	"errors"
	"fmt"
	"io"

	"github.com/carvelab/carve/internal/size"
)

// x/exp/trace reads a whole generation of a Go execution trace (about a
// second of the program) before it returns the generation's first event:
// every batch of it, copied out, and the tables of strings, stacks and CPU
// samples, decoded. What that costs is not the generation's bytes. A
// batch of 5 bytes, empty, holds 569 bytes of heap (the bytes.Buffer it
// is copied into grows to 640), one of 30 to 500 bytes 1,081; a full batch
// of 64 KiB twice its size (the buffer grows once more when it is full);
// a table of stacks of no frame 12.8 bytes per byte, of one frame 14.8,
// one of strings 8.5, of CPU samples 8.3 (Go 1.26.8, x/exp
// v0.0.0-20261113113407, the heap after a collection: TestGoBatchCost
// measures them again). A generation of nothing but empty batches, which
// never ends, makes the reader take 113 bytes of heap per byte of the
// trace.
//
// GoBound sits in front of x/exp/trace and reads the trace's batch
// framing as the bytes pass, keeping none of them: per generation it
// counts what the reader will hold, goBytesCost times each batch's bytes
// (goTableCost for those of a table batch), plus goBatchCost per batch,
// and refuses the bytes that would take the count past the bound with an
// error wrapping ErrGoGeneration. The framing (internal/trace/batch.go of
// the Go tree, format 1.22 and later):
//
//	EvEventBatch         gen M time size [size bytes]   gen, M, time, size: uvarints
//	EvExperimentalBatch  exp gen M time size [size bytes]  exp: one byte
//	EvEndOfGeneration                                    (Go 1.26 and later) the generation ends
//
// A generation also ends where a batch of another generation number
// starts (the traces of Go 1.22 to 1.25 have no end marker). Bytes that do
// not frame a batch are passed on uncounted: x/exp/trace refuses them.

// The costs per byte and per batch GoBound counts (see above: each is at
// or above the heap that was measured for it).
const (
	goBytesCost = 2    // per byte of a batch: its copy, grown
	goTableCost = 16   // per byte of a batch of strings, stacks or CPU samples: its decoded table
	goBatchCost = 1024 // per batch: its copy's least buffer, and its entry
)

// GoGenerationCost says how the cost of a generation is counted, for
// help texts.
var GoGenerationCost = fmt.Sprintf("%d B per byte of its batches, %d B per byte of its tables of strings, stacks and CPU samples, and %d B per batch",
	goBytesCost, goTableCost, goBatchCost)

// DefaultMaxGoGeneration is the default of ReaderOptions.MaxGoGeneration:
// 128 MiB, a generation of up to 64 MiB of full batches, or of 130,000
// empty ones. (A program allocating 16-byte objects as fast as it can on
// two cores wrote generations of up to 51 MB, counted 102 MB.) While it
// reads a generation, x/exp/trace still holds the one before (it replaces
// it once the new one is read): a Reader holds up to twice the bound.
const DefaultMaxGoGeneration = 128 << 20

// MaxGoGenerationFlag is the name of carve's flag that sets
// ReaderOptions.MaxGoGeneration: the error of a generation past it names
// it.
const MaxGoGenerationFlag = "max-go-generation"

// ErrGoGeneration is wrapped by the error of a Go execution trace one of
// whose generations would cost the reader more than
// ReaderOptions.MaxGoGeneration.
var ErrGoGeneration = errors.New("trace: a generation of the Go execution trace is too large to read")

// The event types of the framing (internal/trace/tracev2/events.go).
const (
	goEvEventBatch        = 1
	goEvStacks            = 2
	goEvStrings           = 4
	goEvCPUSamples        = 6
	goEvExperimentalBatch = 49
	goEvEndOfGeneration   = 52
	goMaxBatchSize        = 64 << 10
)

// goFrame says what the next byte of the framing is.
type goFrame uint8

const (
	goFrameType  goFrame = iota // a batch's type
	goFrameExp                  // an experimental batch's experiment
	goFrameField                // a byte of a uvarint of the batch's header
	goFrameKind                 // the first byte of the batch's data: its kind
	goFrameLost                 // not a batch: x/exp/trace fails on it
)

// GoBound is the reader in front of x/exp/trace (see above). Reader puts
// one in front of its own; other readers of Go execution traces with
// x/exp/trace put one in front of theirs (NewGoBound).
type GoBound struct {
	rd  io.Reader
	max int64

	skip   int64   // bytes to pass before the next goFrameType (the header, or a batch's data)
	frame  goFrame // what the byte after skip is
	exp    bool    // the batch is an experimental one
	field  int     // the uvarint of the header being read: gen, M, time, size
	v      uint64  // its value so far
	shift  uint
	head   int64  // the header's bytes so far
	size   int64  // the batch's data's bytes
	gen    uint64 // the generation of the batches counted
	start  bool   // gen is set
	offset int64  // bytes passed

	cost    int64 // the generation's
	batches int64 // its batches
	bytes   int64 // its bytes
	ended   int   // generations ended
	peak    int64 // the largest cost of an ended generation
	total   int64 // the cost of every generation so far
	err     error // sticky
}

// goHeaderLen is the length of the header of a Go execution trace, which
// x/exp/trace reads whole ("go 1.26 trace\x00\x00\x00").
const goHeaderLen = 16

// NewGoBound returns a GoBound of the Go execution trace in rd, its
// header included, for xtrace.NewReader to read: one of its generations
// that would cost more than max (0: DefaultMaxGoGeneration) stops it with
// an error wrapping ErrGoGeneration. x/exp/trace does not always wrap the
// errors of its reader: after any error of it, see Err.
func NewGoBound(rd io.Reader, max int64) *GoBound {
	if max <= 0 {
		max = DefaultMaxGoGeneration
	}
	return &GoBound{rd: rd, max: max, skip: goHeaderLen}
}

// Err returns the error that stopped the trace, wrapping
// ErrGoGeneration, or nil.
func (b *GoBound) Err() error { return b.err }

// Read reads from the trace, counting what passes.
func (b *GoBound) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.rd.Read(p)
	if cerr := b.count(p[:n]); cerr != nil {
		b.err = cerr
		return 0, cerr
	}
	return n, err
}

// count reads the framing in p.
func (b *GoBound) count(p []byte) error {
	for len(p) > 0 {
		if b.skip > 0 {
			k := min(b.skip, int64(len(p)))
			b.skip -= k
			b.offset += k
			p = p[k:]
			continue
		}
		c := p[0]
		p = p[1:]
		b.offset++
		if err := b.step(c); err != nil {
			return err
		}
	}
	return nil
}

// step reads byte c of the framing.
func (b *GoBound) step(c byte) error {
	switch b.frame {
	case goFrameType:
		switch c {
		case goEvEndOfGeneration:
			b.endGeneration()
			b.start = false // the next batch's generation starts the count
		case goEvEventBatch, goEvExperimentalBatch:
			b.exp = c == goEvExperimentalBatch
			b.frame, b.field, b.v, b.shift, b.head = goFrameField, 0, 0, 0, 1
			if b.exp {
				b.frame = goFrameExp
			}
		default:
			b.lose()
		}
	case goFrameExp:
		b.frame, b.head = goFrameField, b.head+1
	case goFrameField:
		b.head++
		if b.shift > 63 {
			b.lose() // a uvarint too long
			return nil
		}
		b.v |= uint64(c&0x7f) << b.shift
		b.shift += 7
		if c&0x80 != 0 {
			return nil
		}
		return b.endField()
	case goFrameKind:
		b.frame, b.skip = goFrameType, b.size-1
		if !b.exp && (c == goEvStacks || c == goEvStrings || c == goEvCPUSamples) {
			return b.charge((goTableCost - goBytesCost) * b.size)
		}
	}
	return nil
}

// lose passes the rest of the trace on uncounted: it is no batch, and
// x/exp/trace fails on it.
func (b *GoBound) lose() {
	b.frame, b.skip = goFrameLost, 1<<62
}

// endField takes the uvarint just read, field b.field of a batch's header.
func (b *GoBound) endField() error {
	v := b.v
	b.field++
	b.v, b.shift = 0, 0
	switch b.field {
	case 1: // the generation
		if b.start && v != b.gen {
			b.endGeneration()
		}
		b.gen, b.start = v, true
	case 4: // the size: the header is read
		if v > goMaxBatchSize {
			b.lose()
			return nil
		}
		b.batches++
		b.bytes += b.head + int64(v)
		if err := b.charge(goBytesCost*(b.head+int64(v)) + goBatchCost); err != nil {
			return err
		}
		b.frame, b.size = goFrameType, int64(v)
		if v > 0 {
			b.frame = goFrameKind
		}
	}
	return nil
}

// endGeneration starts the count of a new generation.
func (b *GoBound) endGeneration() {
	b.ended++
	b.peak = max(b.peak, b.cost)
	b.cost, b.batches, b.bytes = 0, 0, 0
}

// charge adds c to the generation's cost, and fails past the bound.
func (b *GoBound) charge(c int64) error {
	b.cost += c
	b.total += c
	if b.cost <= b.max {
		return nil
	}
	return fmt.Errorf("%w: generation %d would cost the reader more than %s of memory (%d batches, %s, by byte %d of the trace); --%s raises the bound",
		ErrGoGeneration, b.gen, size.Format(b.max), b.batches, size.Format(b.bytes), b.offset, MaxGoGenerationFlag)
}
