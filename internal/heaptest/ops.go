package heaptest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

// Ops decodes the operations of a fuzz input of fit's and heap's
// differential tests, one byte at a time; past the end it reads zeros.
type Ops struct {
	ops []byte
	i   int
}

// NewOps returns a decoder of ops.
func NewOps(ops []byte) *Ops { return &Ops{ops: ops} }

// More reports whether bytes remain.
func (o *Ops) More() bool { return o.i < len(o.ops) }

// Pos returns the index of the next byte.
func (o *Ops) Pos() int { return o.i }

// Byte returns the next byte.
func (o *Ops) Byte() byte {
	if o.i >= len(o.ops) {
		return 0
	}
	c := o.ops[o.i]
	o.i++
	return c
}

// Size decodes a size from 3 bytes: 16 random bits scaled by 2^e, e = the
// first byte % 21, sizes from 0 to 1 MiB, as many below 64 bytes as
// between 64 KiB and 1 MiB.
func (o *Ops) Size() int {
	e := int(o.Byte() % 21)
	v := int(o.Byte())<<8 | int(o.Byte())
	if e <= 16 {
		return v >> (16 - e)
	}
	return v << (e - 16)
}

// Align decodes an alignment from a byte: 1 to 16 for bytes under 192,
// else 1 to 4096.
func (o *Ops) Align() int {
	a := int(o.Byte())
	if a < 192 {
		return 1 << (a % 5)
	}
	return 1 << (a % 13)
}

// Runner is a heap under test with its model, as Run drives it. Free and
// Realloc get the address of one of the model's live blocks.
type Runner interface {
	Model() *Model
	Alloc(size, align int)
	Free(a uintptr)
	Realloc(a uintptr, size int)
	Probe(v int)        // misuse the heap, variant v
	Trim()              // Trim, and check what it gave back
	VerifyAll()         // check every live block's bytes and whatever else is slow
	Verify(step string) // check the invariants and counts after step
}

// Run decodes ops and makes the calls on r, verifying after each one,
// then frees every block. It reads the first 4096 bytes of ops. Each
// operation is a kind byte, kind%8, and its
// arguments:
//
//	0, 1, 2  Alloc(size, align)      size: 3 bytes, align: 1 byte (see Ops)
//	3, 4     Free(live[idx])         idx: 1 byte
//	5        Realloc(live[idx], size)
//	6        misuse probe (variant: 1 byte)
//	7        Trim (kind/8 even), or VerifyAll
func Run(r Runner, ops []byte) {
	m, o := r.Model(), NewOps(ops[:min(len(ops), 4096)])
	r.Verify("New")
	for o.More() {
		kind := o.Byte()
		switch kind % 8 {
		case 0, 1, 2:
			r.Alloc(o.Size(), o.Align())
		case 3, 4:
			if a := m.Addrs(); len(a) > 0 {
				r.Free(a[int(o.Byte())%len(a)])
			}
		case 5:
			if a := m.Addrs(); len(a) > 0 {
				r.Realloc(a[int(o.Byte())%len(a)], o.Size())
			}
		case 6:
			r.Probe(int(o.Byte()))
		case 7:
			if kind/8%2 == 0 {
				r.Trim()
			} else {
				r.VerifyAll()
			}
		}
		r.Verify("op at byte " + strconv.Itoa(o.Pos()))
	}
	r.VerifyAll()
	for a := m.Addrs(); len(a) > 0; a = m.Addrs() {
		r.Free(a[len(a)/2])
	}
	r.Verify("freeing everything")
}

// Count is how many inputs a random test runs: Default, Short with
// -short (Default when Short is 0), Long with CARVE_LONG=1.
type Count struct{ Default, Short, Long int }

// Inputs runs pseudo-random inputs from the seed (s1, s2) as subtests
// named by their index, as many as n says. draw takes one input from r
// and returns its description and its test. Inputs stops at the first
// input that fails and logs its description.
func Inputs(t *testing.T, s1, s2 uint64, n Count, draw func(r *rand.Rand) (input string, run func(t *testing.T))) {
	count := n.Default
	if testing.Short() && n.Short > 0 {
		count = n.Short
	}
	if os.Getenv("CARVE_LONG") == "1" {
		count = n.Long
	}
	r := rand.New(rand.NewPCG(s1, s2))
	for i := range count {
		input, run := draw(r)
		if !t.Run(strconv.Itoa(i), run) {
			t.Logf("input %d: %s", i, input)
			break
		}
	}
}

// RandomInputs runs run over pseudo-random inputs from the seed (s1, s2):
// 24 by default, 4 with -short, long with CARVE_LONG=1. Each is a
// configuration byte and up to 1500 bytes of operations.
func RandomInputs(t *testing.T, s1, s2 uint64, long int, run func(t *testing.T, cfg byte, ops []byte)) {
	Inputs(t, s1, s2, Count{Default: 24, Short: 4, Long: long}, func(r *rand.Rand) (string, func(t *testing.T)) {
		ops := make([]byte, r.IntN(1500))
		for j := range ops {
			ops[j] = byte(r.Uint32())
		}
		cfg := byte(r.Uint32())
		return fmt.Sprintf("cfg %d, ops %q", cfg, ops), func(t *testing.T) { run(t, cfg, ops) }
	})
}
