package fit

import (
	"fmt"
	"strings"
)

// Policy is a placement policy: which free block serves a request. The
// names that String returns and ParsePolicy accepts are fixed; the lab's
// tables, JSON and --alloc lists use them.
//
// Each policy keeps the free blocks (the top aside) in its own index, and
// all share the block layout, so that two heaps given the same requests
// differ only in where they put them:
//
//   - FirstFit ("first-fit"): one list, freed blocks pushed at its head
//     (LIFO); a request takes the first block on the list that is large
//     enough. The remainder of a split block keeps the block's place in
//     the list. The list is kept as an index by list order, a tree in Go
//     memory over each block's position holding the largest block under
//     each node: Alloc and Free are O(log free blocks), and place every
//     block exactly where a walk of the list from its head would.
//   - NextFit ("next-fit"): the same list, searched from a roving pointer
//     left where the previous search ended (at the remainder of the block
//     it split, or after the block it took), wrapping around once; the
//     same index finds the first fit from the rover on, O(log free
//     blocks).
//   - BestFit ("best-fit"): the smallest free block that is large enough.
//     Blocks under 1 KiB sit in exact-size bins, lists threaded through
//     the blocks, one per multiple of 16, with a bitmap of the non-empty
//     ones: the smallest bin at least as large as the request is one bit
//     scan, O(1), and within a bin the most recently freed block goes
//     first. Larger blocks sit in a treap keyed by (size, address), its
//     16-byte nodes in Go memory: O(log n) expected to find, insert and
//     remove, and among equal sizes the lowest address goes first.
//   - AddressOrderedFirstFit ("ao-first-fit"): the free block at the
//     lowest address that is large enough. A bitmap marks free blocks'
//     starts, and a complete binary tree over the heap's 4 KiB pages (an
//     implicit segment tree keyed by address) holds in each node the
//     largest free block starting under it: a search descends to the
//     first page holding a fit in O(log(footprint / 4 KiB)), at most 23
//     levels, then scans that page's at most 64 free blocks. Insert and
//     remove update one leaf and its ancestors, stopping where the
//     maximum does not change.
type Policy int

// The placement policies.
const (
	FirstFit Policy = iota
	NextFit
	BestFit
	AddressOrderedFirstFit
	numPolicies
)

var policyNames = [numPolicies]string{"first-fit", "next-fit", "best-fit", "ao-first-fit"}

// String returns the policy's fixed name, e.g. "best-fit".
func (p Policy) String() string {
	if p.valid() {
		return policyNames[p]
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

func (p Policy) valid() bool { return p >= 0 && p < numPolicies }

// Policies returns every policy, in the order of their constants.
func Policies() []Policy {
	ps := make([]Policy, numPolicies)
	for i := range ps {
		ps[i] = Policy(i)
	}
	return ps
}

// ParsePolicy returns the policy named s, one of the names String returns.
func ParsePolicy(s string) (Policy, error) {
	for i, n := range policyNames {
		if s == n {
			return Policy(i), nil
		}
	}
	return 0, fmt.Errorf("%w: %q (want one of %s)", ErrPolicy, s, strings.Join(policyNames[:], ", "))
}
