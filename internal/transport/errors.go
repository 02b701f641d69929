package transport

import (
	"context"
	"errors"
	"fmt"
)

// Kind classifies a communicator failure so callers can branch on it.
type Kind uint8

// Failure kinds. The numeric values travel in Abort frames; do not reorder.
const (
	KindUnknown   Kind = iota
	KindPeerDied       // the peer's connection closed or reset
	KindSilent         // no bytes, not even heartbeats, for the silence timeout: dead or frozen
	KindTimeout        // the operation timeout passed while waiting on the rank
	KindMismatch       // ranks called different collectives, counts, types or ops
	KindCanceled       // the caller's context ended the operation
	KindProtocol       // malformed or unexpected frame
	KindClosed         // the communicator (or the peer's) was closed
	KindAuth           // the peer failed authentication
	KindLocal          // a local failure (e.g. invalid buffer) aborted the communicator
	KindIntegrity      // a frame from the peer failed its integrity check (changed on the path; see IntegrityError)
)

var kindNames = [...]string{"unknown failure", "peer died", "peer silent", "timeout", "collective mismatch", "canceled", "protocol error", "closed", "authentication failed", "local failure", "frame integrity"}

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
	b = fmt.Appendf(b, "ringtail rank %d: ", e.Local)
	waited := (e.Kind == KindTimeout || e.Kind == KindCanceled) && (e.Detail != "" || e.Rank != NoRank)
	if waited {
		// torch's convention ("Timed out", as its tests and users grep
		// for), then the call (the Detail of a wait: "in Barrier") and
		// who waited on whom, each rank named once: "ringtail rank 0:
		// Timed out in Barrier waiting on rank 2" where it happened,
		// "ringtail rank 1: Timed out in Barrier: rank 0 was waiting on
		// rank 2" where it is relayed.
		if e.Kind == KindTimeout {
			b = append(b, "Timed out"...)
		} else {
			b = append(b, "Canceled"...)
		}
		if e.Detail != "" {
			b = append(b, ' ')
			b = append(b, e.Detail...)
		}
		switch {
		case e.Rank == NoRank:
		case e.Reporter == e.Local || e.Reporter == NoRank:
			b = fmt.Appendf(b, " waiting on rank %d", e.Rank)
		default:
			b = fmt.Appendf(b, ": rank %d was waiting on rank %d", e.Reporter, e.Rank)
		}
	} else {
		b = fmt.Appendf(b, "%v", e.Kind)
		if e.Rank != NoRank {
			b = fmt.Appendf(b, ": rank %d", e.Rank)
		}
		if e.Detail != "" {
			b = fmt.Appendf(b, ": %s", e.Detail)
		}
		if e.Reporter != e.Local && e.Reporter != NoRank {
			b = fmt.Appendf(b, " (reported by rank %d)", e.Reporter)
		}
	}
	// A wait's context error says again what "Timed out" or "Canceled"
	// said (it stays in the chain: errors.Is finds it).
	// A Detail that is the cause's own message is said once.
	if e.Err != nil && !(waited && (errors.Is(e.Err, context.DeadlineExceeded) || errors.Is(e.Err, context.Canceled))) && e.Err.Error() != e.Detail {
		b = fmt.Appendf(b, ": %v", e.Err)
	}
	return string(b)
}

func (e *Error) Unwrap() error { return e.Err }
