//go:build !carvecheck

// Package invariants tells carve's allocators whether this is a checked
// build. Built with -tags carvecheck, the allocators detect double frees,
// poison freed memory, verify the poison when memory is handed out again
// (catching writes after free) and run their invariant checkers on slow
// paths. Release builds compile all of that away: Enabled is a constant.
package invariants

// Enabled is true in checked builds (-tags carvecheck).
const Enabled = false

// Poison is the byte checked builds write over freed memory.
const Poison = 0xdb
