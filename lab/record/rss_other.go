//go:build !linux

package record

// procfs returns nil: the sampler needs Linux's /proc.
func procfs() procReader { return nil }
