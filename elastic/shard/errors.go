package shard

import "errors"

// Errors returned by Queue. Callers (and the network client, which maps
// wire error codes back to these) branch on them with errors.Is.
var (
	// ErrNoShard means no shard is TODO right now but some are DOING: the
	// epoch may still need them back (a worker can fail or die), so retry
	// later.
	ErrNoShard = errors.New("shard: no shard available yet")
	// ErrFinished means every shard of every epoch is DONE.
	ErrFinished = errors.New("shard: all epochs finished")
	// ErrUnknownShard means the shard ID does not name a shard of the
	// current or an earlier epoch.
	ErrUnknownShard = errors.New("shard: unknown shard")
	// ErrNotOwner means a worker reported failure for a shard it does not
	// hold (it was reassigned or already finished); nothing changed.
	ErrNotOwner = errors.New("shard: worker does not hold the shard")
	// ErrInvalidConfig wraps every Config.Validate error.
	ErrInvalidConfig = errors.New("shard: invalid config")
	// ErrInvalidCommand means a command is malformed (unknown op, empty
	// worker id).
	ErrInvalidCommand = errors.New("shard: invalid command")
)
