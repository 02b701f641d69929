package straggler

import "errors"

// Errors callers branch on with errors.Is.
var (
	// ErrBadObservation marks an observation with out-of-range fields.
	ErrBadObservation = errors.New("straggler: bad observation")
	// ErrInvalidConfig marks a configuration that Validate rejects.
	ErrInvalidConfig = errors.New("straggler: invalid config")
)
