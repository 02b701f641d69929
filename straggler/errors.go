package straggler

import "errors"

// Errors the Controller returns for observations it cannot use; callers
// branch on them with errors.Is.
var (
	// ErrBadObservation marks an observation with out-of-range fields.
	ErrBadObservation = errors.New("straggler: bad observation")
	// ErrStaleObservation marks an observation of a step already decided.
	ErrStaleObservation = errors.New("straggler: observation of a closed step")
	// ErrTooFarAhead marks an observation more than Config.MaxAhead steps
	// past the open step.
	ErrTooFarAhead = errors.New("straggler: observation too far ahead")
	// ErrDuplicateObservation marks a second observation of a (rank, step).
	ErrDuplicateObservation = errors.New("straggler: duplicate observation")
	// ErrInvalidConfig marks a configuration that Validate rejects.
	ErrInvalidConfig = errors.New("straggler: invalid config")
)
