package cloop_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/carvelab/carve/lab/libc"
	"github.com/carvelab/carve/lab/libc/internal/cloop"
)

func TestRun(t *testing.T) {
	ops := []libc.Op{
		{Kind: libc.OpMalloc, Slot: 0, Size: 100},
		{Kind: libc.OpCalloc, Slot: 1, Size: 10},
		{Kind: libc.OpMemalign, Slot: 2, Size: 64, Align: 4096},
		{Kind: libc.OpRealloc, Slot: 0, Size: 5000},
		{Kind: libc.OpRealloc, Slot: 3, Size: 7},
		{Kind: libc.OpFree, Slot: 1},
		{Kind: libc.OpMalloc, Slot: 1, Size: 0},
	}
	p, err := cloop.Prepare(ops)
	if err != nil {
		t.Fatalf("Prepare error: %v", err)
	}
	done, err := p.Run()
	if !libc.Available() {
		if !errors.Is(err, libc.ErrUnavailable) {
			t.Errorf("Run without cgo = %d, %v, want ErrUnavailable", done, err)
		}
		return
	}
	if done != len(ops) || err != nil {
		t.Errorf("Run = %d, %v, want %d, nil", done, err, len(ops))
	}
}

func TestRunNull(t *testing.T) {
	if !libc.Available() {
		t.Skip("built without cgo")
	}
	p, err := cloop.Prepare([]libc.Op{
		{Kind: libc.OpMalloc, Slot: 0, Size: 10},
		{Kind: libc.OpMalloc, Slot: 1, Size: 1 << 62},
	})
	if err != nil {
		t.Fatal(err)
	}
	if done, err := p.Run(); done != 1 || !errors.Is(err, libc.ErrNoMemory) {
		t.Errorf("Run = %d, %v, want 1, ErrNoMemory", done, err)
	}
}

func TestPrepareRefuses(t *testing.T) {
	for name, op := range map[string]libc.Op{
		"zero kind":     {Kind: 0},
		"unknown kind":  {Kind: libc.OpFree + 1},
		"bad alignment": {Kind: libc.OpMemalign, Size: 8, Align: 48},
	} {
		_, err := cloop.Prepare([]libc.Op{{Kind: libc.OpMalloc, Size: 1}, op})
		if !errors.Is(err, libc.ErrInvalid) || !strings.Contains(err.Error(), "op 1:") {
			t.Errorf("Prepare with a %s: error = %v, want ErrInvalid naming op 1", name, err)
		}
	}
}
