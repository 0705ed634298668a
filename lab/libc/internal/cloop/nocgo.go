//go:build !cgo || !linux

package cloop

import "github.com/carvelab/carve/lab/libc"

func run([]libc.Op, int) (done, status int) { return 0, runUnavailable }
