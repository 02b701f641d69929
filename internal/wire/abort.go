package wire

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"
)

// NoRank marks an Abort that blames no particular rank.
const NoRank = -1

// abortFixed is the size of an Abort payload's fixed fields (origin,
// culprit, code) before its reason.
const abortFixed = 9

// AbortError is the payload of an Abort frame: a rank gave up on the
// communicator, blaming Culprit (or NoRank) for Reason. It is also the error
// a receiver of such a frame reports.
type AbortError struct {
	Origin  int    // rank that first failed
	Culprit int    // rank blamed, or NoRank
	Code    uint8  // failure class, defined by the transport (0 = unspecified)
	Reason  string // human-readable cause, at most MaxControlPayload-9 bytes
}

func (a *AbortError) Error() string {
	if a.Culprit == NoRank {
		return fmt.Sprintf("rank %d aborted: %s", a.Origin, a.Reason)
	}
	return fmt.Sprintf("rank %d aborted, blaming rank %d: %s", a.Origin, a.Culprit, a.Reason)
}

// Marshal encodes the abort, truncating an over-long reason at a rune boundary.
func (a *AbortError) Marshal() []byte {
	reason := a.Reason
	if max := MaxControlPayload - 9; len(reason) > max {
		reason = reason[:max]
		for !utf8.ValidString(reason) {
			reason = reason[:len(reason)-1]
		}
	}
	b := make([]byte, 9+len(reason))
	binary.LittleEndian.PutUint32(b, uint32(int32(a.Origin)))
	binary.LittleEndian.PutUint32(b[4:], uint32(int32(a.Culprit)))
	b[8] = a.Code
	copy(b[9:], reason)
	return b
}

// ParseAbort decodes an Abort payload.
func ParseAbort(p []byte) (*AbortError, error) {
	if len(p) < 9 || len(p) > MaxControlPayload {
		return nil, fmt.Errorf("%w: abort payload of %d bytes", ErrMalformed, len(p))
	}
	a := &AbortError{
		Origin:  int(int32(binary.LittleEndian.Uint32(p))),
		Culprit: int(int32(binary.LittleEndian.Uint32(p[4:]))),
		Code:    p[8],
		Reason:  string(p[9:]),
	}
	if a.Origin < 0 || a.Culprit < NoRank || !utf8.ValidString(a.Reason) {
		return nil, fmt.Errorf("%w: abort with origin %d, culprit %d", ErrMalformed, a.Origin, a.Culprit)
	}
	return a, nil
}
