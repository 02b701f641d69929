package elastic

import (
	"errors"

	"github.com/ringtail-ml/ringtail/elastic/view"
)

// Errors callers branch on. Worker methods wrap them with detail; match
// with errors.Is.
var (
	// ErrStop is returned by a step function to end Run successfully.
	ErrStop = errors.New("elastic: stop")
	// ErrBelowMinNP: the job stayed below min-np for MinWait.
	ErrBelowMinNP = view.ErrBelowMinNP
	// ErrStartTimeout: fewer than min-np nodes joined within StartTimeout.
	ErrStartTimeout = view.ErrStartTimeout
	// ErrViewMismatch: the ranks of a new communicator hold different views
	// (the agreement all-reduce disagreed); the generation is re-formed.
	ErrViewMismatch = errors.New("elastic: ranks disagree on the view")
	// ErrClosed: the worker was closed.
	ErrClosed = errors.New("elastic: worker closed")
	// errSuperseded is the cause a generation's context ends with when a
	// newer view is adopted.
	errSuperseded = errors.New("elastic: generation superseded")
)

// ExitCode maps Run's (or Join's) result to a process exit status: 0 for
// nil, ExitJobLost when the job cannot go on (ErrBelowMinNP,
// ErrStartTimeout), 1 otherwise.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrBelowMinNP), errors.Is(err, ErrStartTimeout):
		return ExitJobLost
	default:
		return 1
	}
}
