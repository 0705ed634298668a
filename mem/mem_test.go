package mem_test

import (
	"errors"
	"math"
	"os"
	"runtime"
	"testing"
	"unsafe"

	"github.com/carvelab/carve/mem"
)

const mib = 1 << 20

func TestReserveSizes(t *testing.T) {
	ps := mem.PageSize()
	tests := []struct {
		name string
		size int
		want int
		err  error
	}{
		{"one byte", 1, ps, nil},
		{"one page", ps, ps, nil},
		{"page plus one", ps + 1, 2 * ps, nil},
		{"zero", 0, 0, mem.ErrSize},
		{"negative", -1, 0, mem.ErrSize},
		{"too large", math.MaxInt, 0, mem.ErrSize},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := mem.Reserve(tt.size)
			if !errors.Is(err, tt.err) {
				t.Fatalf("Reserve(%d) error = %v, want %v", tt.size, err, tt.err)
			}
			if err != nil {
				return
			}
			defer r.Release()
			if r.Size() != tt.want || r.Committed() != 0 {
				t.Errorf("Reserve(%d): Size %d, Committed %d, want %d, 0", tt.size, r.Size(), r.Committed(), tt.want)
			}
		})
	}
}

func TestCommitDecommitAccounting(t *testing.T) {
	ps := mem.PageSize()
	r, err := mem.Reserve(16 * ps)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	steps := []struct {
		name          string
		op            func() error
		wantCommitted int
	}{
		{"commit pages 0-3", func() error { return r.Commit(0, 4*ps) }, 4 * ps},
		{"commit again changes nothing", func() error { return r.Commit(ps, ps) }, 4 * ps},
		{"commit a byte rounds out to its page", func() error { return r.Commit(8*ps+5, 1) }, 5 * ps},
		{"decommit shrinks inwards", func() error { return r.Decommit(ps/2, 2*ps) }, 4 * ps},
		{"decommit a reserved page changes nothing", func() error { return r.Decommit(12*ps, ps) }, 4 * ps},
		{"decommit everything", func() error { return r.Decommit(0, 16*ps) }, 0},
	}
	for _, s := range steps {
		if err := s.op(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := r.Committed(); got != s.wantCommitted {
			t.Fatalf("%s: Committed() = %d, want %d", s.name, got, s.wantCommitted)
		}
	}
}

func TestBadRanges(t *testing.T) {
	ps := mem.PageSize()
	r, err := mem.Reserve(4 * ps)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		op   func() error
	}{
		{"commit negative offset", func() error { return r.Commit(-1, 1) }},
		{"commit negative length", func() error { return r.Commit(0, -1) }},
		{"commit past the end", func() error { return r.Commit(3*ps, 2*ps) }},
		{"decommit past the end", func() error { return r.Decommit(0, 5*ps) }},
		{"resident past the end", func() error { _, err := r.Resident(4*ps, 1); return err }},
	}
	for _, tt := range tests {
		if err := tt.op(); !errors.Is(err, mem.ErrRange) {
			t.Errorf("%s: error = %v, want %v", tt.name, err, mem.ErrRange)
		}
	}
	if r.Committed() != 0 {
		t.Errorf("Committed() = %d after refused calls, want 0", r.Committed())
	}
	if err := r.Release(); err != nil {
		t.Fatal(err)
	}
	if err := r.Release(); !errors.Is(err, mem.ErrReleased) {
		t.Errorf("second Release() = %v, want %v", err, mem.ErrReleased)
	}
	if err := r.Commit(0, ps); !errors.Is(err, mem.ErrReleased) {
		t.Errorf("Commit after Release = %v, want %v", err, mem.ErrReleased)
	}
}

// TestDecommitLowersResident writes 32 MiB, then decommits it: the region's
// resident bytes (mincore) and the process's RSS must both fall, and the
// pages must read as zero when committed again.
func TestDecommitLowersResident(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("resident bytes are measured with mincore on Linux only")
	}
	const size = 32 * mib
	r, err := mem.Reserve(size)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if err := r.Commit(0, size); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Resident(0, size); got != 0 {
		t.Errorf("Resident after Commit = %d, want 0 (nothing touched)", got)
	}
	b := r.Bytes()
	for i := 0; i < size; i += mem.PageSize() {
		b[i] = 1
	}
	before, err := r.Resident(0, size)
	if err != nil {
		t.Fatal(err)
	}
	if before != size {
		t.Errorf("Resident after touching every page = %d, want %d", before, size)
	}
	rssBefore, err := mem.RSS()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Decommit(0, size); err != nil {
		t.Fatal(err)
	}
	after, err := r.Resident(0, size)
	if err != nil {
		t.Fatal(err)
	}
	if after != 0 {
		t.Errorf("Resident after Decommit = %d, want 0", after)
	}
	rssAfter, err := mem.RSS()
	if err != nil {
		t.Fatal(err)
	}
	if drop := rssBefore - rssAfter; drop < size/2 {
		t.Errorf("RSS fell by %d bytes after decommitting %d, want at least half", drop, size)
	}
	if err := r.Commit(0, size); err != nil {
		t.Fatal(err)
	}
	if b[0] != 0 || b[size-mem.PageSize()] != 0 {
		t.Errorf("recommitted pages read %d and %d, want zero", b[0], b[size-mem.PageSize()])
	}
}

func TestResidentOfGoMemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("mincore is Linux only")
	}
	b := make([]byte, 4*mib)
	for i := range b {
		b[i] = 1
	}
	got, err := mem.Resident(b[1:])
	if err != nil {
		t.Fatal(err)
	}
	if got < len(b)-mem.PageSize() || got > len(b)+2*mem.PageSize() {
		t.Errorf("Resident of a written %d-byte slice = %d", len(b), got)
	}
	if n, err := mem.Resident(nil); n != 0 || err != nil {
		t.Errorf("Resident(nil) = %d, %v, want 0, nil", n, err)
	}
}

func TestPeakRSS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("RSS is read from /proc on Linux only")
	}
	if err := mem.ResetPeakRSS(); err != nil {
		t.Fatal(err)
	}
	r, err := mem.Reserve(16 * mib)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if err := r.Commit(0, r.Size()); err != nil {
		t.Fatal(err)
	}
	rss0, _ := mem.RSS()
	b := r.Bytes()
	for i := 0; i < len(b); i += mem.PageSize() {
		b[i] = 1
	}
	peak, err := mem.PeakRSS()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Decommit(0, r.Size()); err != nil {
		t.Fatal(err)
	}
	rss1, _ := mem.RSS()
	if peak < rss0+8*mib || peak < rss1 {
		t.Errorf("PeakRSS = %d, want above RSS before (%d) plus most of 16 MiB and above RSS after (%d)", peak, rss0, rss1)
	}
}

func TestContains(t *testing.T) {
	ps := mem.PageSize()
	r, err := mem.Reserve(4 * ps)
	if err != nil {
		t.Fatal(err)
	}
	all := unsafe.Slice((*byte)(r.Base()), 4*ps)
	other := make([]byte, 16)
	tests := []struct {
		name string
		b    []byte
		want bool
	}{
		{"the whole region", all, true},
		{"its first byte", all[:1:1], true},
		{"its last byte", all[4*ps-1:], true},
		{"empty, at its end", all[4*ps:], true},
		{"a middle page", all[ps : 2*ps : 2*ps], true},
		{"length inside, capacity beyond", unsafe.Slice((*byte)(r.Base()), 4*ps+1)[:8], false},
		{"one byte before", unsafe.Slice((*byte)(unsafe.Add(r.Base(), -1)), 2), false},
		{"Go memory", other, false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		if got := r.Contains(tt.b); got != tt.want {
			t.Errorf("Contains(%s) = %v, want %v", tt.name, got, tt.want)
		}
	}
	if err := r.Release(); err != nil {
		t.Fatal(err)
	}
	if r.Contains(all[:1]) {
		t.Error("Contains after Release = true")
	}
}

// TestAnonRSS: touching fresh anonymous memory raises the anonymous RSS
// by about as much, and it never exceeds the RSS.
func TestAnonRSS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("RSS is measured on Linux only")
	}
	r, err := mem.Reserve(64 * mib)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	before, err := mem.AnonRSS()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Commit(0, 32*mib); err != nil {
		t.Fatal(err)
	}
	b := r.Bytes()[:32*mib]
	for i := 0; i < len(b); i += mem.PageSize() {
		b[i] = 1
	}
	after, _ := mem.AnonRSS()
	all, _ := mem.RSS()
	if grew := after - before; grew < 30*mib || grew > 40*mib {
		t.Errorf("touching 32 MiB raised the anonymous RSS by %d B", grew)
	}
	if after > all {
		t.Errorf("anonymous RSS %d above the RSS %d", after, all)
	}
}

func TestPhysical(t *testing.T) {
	n, err := mem.Physical()
	if errors.Is(err, mem.ErrUnsupported) {
		t.Skip(err)
	}
	if err != nil || n < 64<<20 || n > 1<<50 {
		t.Errorf("Physical() = %d, %v: want a machine's memory", n, err)
	}
	if rss, err := mem.RSS(); err == nil && rss > n {
		t.Errorf("RSS %d above the physical memory %d", rss, n)
	}
}

func TestProcessRSS(t *testing.T) {
	mine, err := mem.ProcessRSS(os.Getpid())
	if errors.Is(err, mem.ErrUnsupported) {
		t.Skip(err)
	}
	if err != nil || mine <= 0 {
		t.Fatalf("ProcessRSS(self) = %d, %v", mine, err)
	}
	if _, err := mem.ProcessRSS(1 << 30); err == nil {
		t.Error("ProcessRSS of no process: no error")
	}
}

// TestMetadataGrowsWithCommits: a region's bitmap covers the pages up to
// the highest committed, not the whole reservation.
func TestMetadataGrowsWithCommits(t *testing.T) {
	r, err := mem.Reserve(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if r.Metadata() != 0 {
		t.Errorf("Metadata of a fresh reservation = %d, want 0", r.Metadata())
	}
	ps := mem.PageSize()
	if err := r.Commit(0, 64*ps); err != nil {
		t.Fatal(err)
	}
	small := r.Metadata()
	if err := r.Commit(1<<29, ps); err != nil {
		t.Fatal(err)
	}
	if small == 0 || small > 64 || r.Metadata() < (1<<29)/int64(ps)/8 {
		t.Errorf("Metadata: %d after 64 pages, %d after a page at 512 MiB", small, r.Metadata())
	}
	if !r.IsCommitted(1<<29, ps) || r.IsCommitted(1<<29+ps, ps) || !r.IsCommitted(0, 64*ps) {
		t.Error("IsCommitted wrong around the grown bitmap")
	}
	if err := r.Decommit(1<<29+8*ps, 1<<20); err != nil { // past the bitmap: nothing to do
		t.Fatal(err)
	}
}
