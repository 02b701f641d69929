package transport

import (
	"fmt"
)

// Kind classifies a communicator failure so callers can branch on it.
type Kind uint8

// Failure kinds. The numeric values travel in Abort frames; do not reorder.
const (
	KindUnknown  Kind = iota
	KindPeerDied      // the peer's connection closed or reset
	KindSilent        // no bytes, not even heartbeats, for the silence timeout: dead or frozen
	KindTimeout       // the operation timeout passed while waiting on the rank
	KindMismatch      // ranks called different collectives, counts, types or ops
	KindCanceled      // the caller's context ended the operation
	KindProtocol      // malformed or unexpected frame
	KindClosed        // the communicator (or the peer's) was closed
	KindAuth          // the peer failed authentication
	KindLocal         // a local failure (e.g. invalid buffer) aborted the communicator
)

var kindNames = [...]string{"unknown failure", "peer died", "peer silent", "timeout", "collective mismatch", "canceled", "protocol error", "closed", "authentication failed", "local failure"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// NoRank is the Rank of an Error that blames no rank.
const NoRank = -1

// Error is every failure a communicator reports once it has started. It names
// the rank to blame (Rank), the rank that first detected the failure
// (Reporter) and the rank reporting it now (Local).
type Error struct {
	Kind     Kind
	Rank     int
	Reporter int
	Local    int
	Detail   string
	Err      error
}

func (e *Error) Error() string {
	var b []byte
	b = fmt.Appendf(b, "ringtail rank %d: %v", e.Local, e.Kind)
	if e.Rank != NoRank {
		b = fmt.Appendf(b, ": rank %d", e.Rank)
	}
	if e.Detail != "" {
		b = fmt.Appendf(b, ": %s", e.Detail)
	}
	if e.Reporter != e.Local && e.Reporter != NoRank {
		b = fmt.Appendf(b, " (reported by rank %d)", e.Reporter)
	}
	if e.Err != nil {
		b = fmt.Appendf(b, ": %v", e.Err)
	}
	return string(b)
}

func (e *Error) Unwrap() error { return e.Err }
