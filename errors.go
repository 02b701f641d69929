package ringtail

import (
	"errors"

	"github.com/ringtail-ml/ringtail/internal/engine"
	"github.com/ringtail-ml/ringtail/internal/transport"
)

// Kind classifies an *Error so callers can branch on it.
type Kind uint8

// Failure kinds.
const (
	// KindUnknown is a failure of no known class.
	KindUnknown Kind = Kind(transport.KindUnknown)
	// KindPeerDied: the peer's connection closed or reset (it crashed,
	// was killed, or its host went away).
	KindPeerDied Kind = Kind(transport.KindPeerDied)
	// KindSilent: no bytes, not even heartbeats, for PeerTimeout: the
	// peer is dead, frozen or unreachable.
	KindSilent Kind = Kind(transport.KindSilent)
	// KindTimeout: OpTimeout passed while waiting on the rank.
	KindTimeout Kind = Kind(transport.KindTimeout)
	// KindMismatch: ranks made different calls (collective, call number,
	// root, count, element type, operator, members); Detail names the
	// calls and the field.
	KindMismatch Kind = Kind(transport.KindMismatch)
	// KindCanceled: the caller's context ended the operation.
	KindCanceled Kind = Kind(transport.KindCanceled)
	// KindProtocol: a peer sent a malformed or unexpected frame.
	KindProtocol Kind = Kind(transport.KindProtocol)
	// KindClosed: the communicator (this rank's or the peer's) was closed.
	KindClosed Kind = Kind(transport.KindClosed)
	// KindAuth: a peer failed authentication.
	KindAuth Kind = Kind(transport.KindAuth)
	// KindLocal: a local failure (an invalid call) aborted the communicator.
	KindLocal Kind = Kind(transport.KindLocal)
	// KindIntegrity: a frame between hosts failed its integrity check
	// (changed, replayed, reordered or cut on the path, or refused unread
	// for a length its sender cannot have written; nothing of it was
	// applied); Detail (or the cause) names the link: both ranks, the
	// channel and both addresses.
	KindIntegrity Kind = Kind(transport.KindIntegrity)
)

// String names the kind ("peer died", "collective mismatch", ...).
func (k Kind) String() string { return transport.Kind(k).String() }

// NoRank is the Rank of an Error that blames no rank.
const NoRank = transport.NoRank

// Error is the error every call returns once the communicator has started.
// Every rank of a failed job reports the same Kind and Rank. Use errors.As
// to inspect it.
type Error struct {
	// Kind classifies the failure.
	Kind Kind
	// Rank is the rank blamed (NoRank when none is).
	Rank int
	// Reporter is the rank that first detected the failure; Local is the
	// rank returning this error.
	Reporter, Local int
	// Detail says what happened, e.g. which calls disagreed and on what.
	Detail string
	// Err is the underlying cause, if any.
	Err error
}

// Error renders the failure, e.g. "ringtail rank 0: peer died: rank 2:
// connection closed (reported by rank 1)".
func (e *Error) Error() string {
	te := transport.Error{Kind: transport.Kind(e.Kind), Rank: e.Rank, Reporter: e.Reporter, Local: e.Local, Detail: e.Detail, Err: e.Err}
	return te.Error()
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// RankOf returns the rank an error blames, if it is (or wraps) an *Error
// that blames one.
func RankOf(err error) (int, bool) {
	var e *Error
	if errors.As(err, &e) && e.Rank != NoRank {
		return e.Rank, true
	}
	return NoRank, false
}

// ErrClosed is returned by calls on a closed communicator.
var ErrClosed = engine.ErrClosed

// public turns the engine's errors into *Error (nil stays nil, and so
// does every other error).
func public(err error) error {
	if err == nil {
		return nil
	}
	var te *transport.Error
	if !errors.As(err, &te) {
		return err
	}
	return &Error{Kind: Kind(te.Kind), Rank: te.Rank, Reporter: te.Reporter, Local: te.Local, Detail: te.Detail, Err: te.Err}
}
