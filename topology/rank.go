package topology

import (
	"fmt"
	"slices"
)

// Rank is one participant: its ID (the index into every Matrix) and the
// host it runs on. Ranks with the same Host share a machine and talk over
// its local interconnect.
type Rank struct {
	// ID is the rank number, >= 0.
	ID int
	// Host names the machine the rank runs on.
	Host string
}

// checkIDs reports whether ids are distinct, non-negative and inside bw.
func checkIDs(what string, ids []int, bw Matrix) error {
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	for i, id := range sorted {
		if id < 0 || (bw.N() > 0 && id >= bw.N()) {
			return fmt.Errorf("%w: %s rank %d outside [0, %d)", ErrInvalidInput, what, id, bw.N())
		}
		if i > 0 && sorted[i-1] == id {
			return fmt.Errorf("%w: duplicate %s rank %d", ErrInvalidInput, what, id)
		}
	}
	return nil
}
