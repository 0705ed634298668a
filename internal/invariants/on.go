//go:build carvecheck

package invariants

// Enabled is true in checked builds (-tags carvecheck).
const Enabled = true

// Poison is the byte checked builds write over freed memory.
const Poison = 0xdb
