package topology

import "errors"

// ErrInvalidInput is wrapped by every error that reports malformed input:
// a non-square matrix, a negative or NaN entry, a rank outside the matrix,
// a duplicate rank, an evicted rank that is also a ring member, a bad probe
// sample. Callers branch on it with errors.Is.
var ErrInvalidInput = errors.New("topology: invalid input")

// ErrNoCapacity is wrapped when the evicted ranks cannot all be given a
// parent: there are more of them than ring members times MaxChildren.
// Callers branch on it (evict fewer ranks, or allow more children).
var ErrNoCapacity = errors.New("topology: not enough parent capacity")
