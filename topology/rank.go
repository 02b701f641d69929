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

// ValidateRanks reports whether ranks have distinct, non-negative IDs that
// all fall inside bw (when bw is non-empty), and whether bw is valid.
func ValidateRanks(ranks []Rank, bw Matrix) error {
	if err := bw.Validate(); err != nil {
		return err
	}
	ids := make([]int, 0, len(ranks))
	for _, r := range ranks {
		if r.ID < 0 {
			return fmt.Errorf("%w: negative rank ID %d", ErrInvalidInput, r.ID)
		}
		if bw.N() > 0 && r.ID >= bw.N() {
			return fmt.Errorf("%w: rank %d outside the %d×%d matrix", ErrInvalidInput, r.ID, bw.N(), bw.N())
		}
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			return fmt.Errorf("%w: duplicate rank %d", ErrInvalidInput, ids[i])
		}
	}
	return nil
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
