//go:build !linux

package sizeclass

// osClassReserve bounds the address space one class reserves on this
// platform. Here package mem backs a reservation with Go memory, which the
// garbage collector counts as live, so a class reserves (and may use) at
// most 64 MiB.
const osClassReserve = min(64<<20, maxClassReserve)
