package launch

import (
	"fmt"
	"syscall"
)

// Exit statuses Run returns besides a rank's own.
const (
	// ExitUsage: the configuration is invalid.
	ExitUsage = 2
	// ExitFailure: the launcher itself failed (the coordinator could not
	// listen or stopped serving, randomness failed, ...).
	ExitFailure = 1
	// ExitCannotExecute: a rank's command exists but cannot be executed.
	ExitCannotExecute = 126
	// ExitNotFound: a rank's command was not found.
	ExitNotFound = 127
	// ExitInterrupted: ctx ended before the ranks did (128+SIGINT, what a
	// shell reports for Ctrl-C).
	ExitInterrupted = 130
)

// RankError reports the rank whose failure ended the job: the first to
// exit with a non-zero status or to be killed by a signal.
type RankError struct {
	Rank int
	Host string
	// Status is the exit status Run returns: the rank's own, or 128+signo
	// when a signal killed it.
	Status int
	// Signal is the signal that killed the rank, 0 when it exited.
	Signal syscall.Signal
}

// Error says which rank failed and how.
func (e *RankError) Error() string {
	if e.Signal != 0 {
		return fmt.Sprintf("rank %d was killed by signal %d (%v)", e.Rank, int(e.Signal), e.Signal)
	}
	return fmt.Sprintf("rank %d exited with status %d", e.Rank, e.Status)
}
