//go:build !cgo || !linux

package cloop

import (
	"unsafe"

	"github.com/carvelab/carve/lab/libc"
)

func run([]libc.Op, int) (done, status int) { return 0, runUnavailable }

func pairs(int, int) int                  { return runUnavailable }
func (w *Window) run(int, int) int        { return runUnavailable }
func newRing(int) (unsafe.Pointer, error) { return nil, libc.ErrUnavailable }
func freeRing(unsafe.Pointer, int)        {}
