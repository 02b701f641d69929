package wire

import (
	"fmt"
	"unsafe"

	"github.com/klauspost/compress/s2"
)

// MaxS2Len is the longest s2 block that a frame decoding to at most n bytes
// may carry (s2.MaxEncodedLen: n as literals plus their tags and the
// length header); a longer compressed payload is malformed whatever it
// holds, so a receiver rejects it before reading it.
func MaxS2Len(n int) int {
	if n < 0 {
		return 0
	}
	m := s2.MaxEncodedLen(n)
	if m < 0 { // above 4 GiB: beyond every limit of this package anyway
		return MaxDataPayload
	}
	return m
}

// EncodeS2 compresses src as one s2 block (s2.Encode) into dst, which is
// used when its capacity is at least MaxS2Len(len(src)).
func EncodeS2(dst, src []byte) []byte { return s2.Encode(dst, src) }

// DecodeS2 decodes the s2 block src into the front of dst and returns the
// number of bytes written. The block's declared length is checked against
// len(dst) before anything is decoded, so a hostile length never
// allocates; a block that does not decode to exactly its declared length
// is corrupt. Every failure wraps ErrMalformed.
func DecodeS2(dst, src []byte) (int, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return 0, fmt.Errorf("%w: compressed payload of %d bytes: %w", ErrMalformed, len(src), err)
	}
	if n > len(dst) {
		return 0, fmt.Errorf("%w: compressed payload declares %d bytes where %d remain of the message", ErrMalformed, n, len(dst))
	}
	if len(src) > MaxS2Len(n) {
		return 0, fmt.Errorf("%w: compressed payload of %d bytes for %d decoded bytes (at most %d)", ErrMalformed, len(src), n, MaxS2Len(n))
	}
	out, err := s2.Decode(dst[:n:n], src)
	if err != nil {
		return 0, fmt.Errorf("%w: compressed payload of %d bytes (declares %d): %w", ErrMalformed, len(src), n, err)
	}
	if n > 0 && unsafe.SliceData(out) != unsafe.SliceData(dst) {
		// Unreachable with s2's documented contract (dst had the room);
		// checked so that a changed library cannot lose data silently.
		return 0, fmt.Errorf("wire: s2 decoded into a buffer of its own")
	}
	return n, nil
}

// FitsMessage reports whether a Data frame with header h may carry the
// next part of a message of which remaining bytes are still to come: a
// plain payload of at most remaining bytes, or an s2 block no longer than
// MaxS2Len(remaining) (its declared length is checked by DecodeS2).
func (h *Header) FitsMessage(remaining int) bool {
	if h.Flags&FlagS2 != 0 {
		return int64(h.Len) <= int64(MaxS2Len(remaining))
	}
	return int64(h.Len) <= int64(remaining)
}
