package shard

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Op names a Command.
type Op string

// The commands that drive a Queue.
const (
	// OpPull takes the next TODO shard for Worker (TODO → DOING), or
	// returns the shard Worker already holds.
	OpPull Op = "pull"
	// OpDone reports Shard finished by Worker, gradients applied (→ DONE).
	OpDone Op = "done"
	// OpFail reports that Worker gave up on Shard (DOING → TODO, at the
	// end of the queue).
	OpFail Op = "fail"
	// OpDied reports Worker gone: all its DOING shards go back to TODO.
	OpDied Op = "died"
)

// Command is one input to the state machine. Commands are what package
// wal logs; replaying the same commands rebuilds the same Queue.
type Command struct {
	// Op is the command.
	Op Op `json:"op"`
	// Worker identifies the worker (non-empty, printable, ≤ MaxWorkerIDLen
	// bytes).
	Worker string `json:"worker"`
	// Shard is the shard ID for OpDone and OpFail.
	Shard int64 `json:"shard,omitempty"`
}

// Validate checks the command's shape (not whether it applies).
func (c Command) Validate() error {
	switch c.Op {
	case OpPull, OpDone, OpFail, OpDied:
	default:
		return fmt.Errorf("%w: unknown op %q", ErrInvalidCommand, c.Op)
	}
	return ValidateWorkerID(c.Worker)
}

// ValidateWorkerID checks that id is non-empty, at most MaxWorkerIDLen
// bytes of valid UTF-8, with no control characters.
func ValidateWorkerID(id string) error {
	if id == "" || len(id) > MaxWorkerIDLen || !utf8.ValidString(id) {
		return fmt.Errorf("%w: worker id must be 1..%d bytes of UTF-8", ErrInvalidCommand, MaxWorkerIDLen)
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: worker id %q contains a control character", ErrInvalidCommand, id)
		}
	}
	return nil
}

// Result is what applying a Command produced.
type Result struct {
	// Shard is the shard pulled, finished or failed.
	Shard Shard
	// Duplicate is set on OpDone when the report was not the first
	// completion by the shard's current holder: the shard was already
	// DONE, or the reporter no longer held it (it had died or been
	// replaced). The shard is DONE afterwards either way.
	Duplicate bool
	// Requeued lists, for OpDied, the IDs of the shards put back to TODO.
	Requeued []int64
	// Changed is whether the queue's state changed; only such commands
	// need to be logged.
	Changed bool
}
