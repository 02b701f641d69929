package wire

import (
	"fmt"
	"unicode/utf8"
)

// Version is the data-plane protocol version carried in Hello (2: the
// 48-byte header with the call descriptor, keyed job tags, stall queries;
// 3: the Hello's frame protection, and frames across hosts sealed with an
// AEAD tag after their payload unless both ends turned that off).
const Version = 3

// NonceSize and MACSize are the sizes of handshake nonces and HMAC-SHA256 tags.
const (
	NonceSize = 32
	MACSize   = 32
	// MaxJobID bounds the job identifier.
	MaxJobID = 128
	// JobTagSize is the size of the keyed job tag a Hello carries instead
	// of the job identifier.
	JobTagSize = 16
	// MaxReason bounds a Verdict's refusal reason.
	MaxReason = 1024
)

// Hello opens a connection: the dialer says who it is and which
// communicator it wants to join. The job is named by a tag keyed with the
// job secret, so the job identifier never travels in the clear; whatever
// else a Hello says is only acted on once the dialer has proved the secret.
type Hello struct {
	Version    uint16
	Channel    uint16
	Rank       uint32 // dialer's rank
	Peer       uint32 // rank the dialer believes it is calling
	World      uint32
	Generation uint64
	JobTag     [JobTagSize]byte
	Nonce      [NonceSize]byte
	// Frames is how the dialer protects frames on a link that crosses
	// hosts (transport.FrameAuth: 0 an AEAD tag on every frame, 1 none,
	// 2 tag and encrypted payload); both ends must agree.
	Frames uint8
}

// HelloSize is the size of a Hello payload (the last byte is reserved,
// zero).
const HelloSize = 2 + 2 + 4 + 4 + 4 + 8 + JobTagSize + NonceSize + 2

// MaxFrames bounds Hello.Frames.
const MaxFrames = 2

// Marshal encodes the Hello.
func (h *Hello) Marshal() []byte {
	b := make([]byte, HelloSize)
	le.PutUint16(b, h.Version)
	le.PutUint16(b[2:], h.Channel)
	le.PutUint32(b[4:], h.Rank)
	le.PutUint32(b[8:], h.Peer)
	le.PutUint32(b[12:], h.World)
	le.PutUint64(b[16:], h.Generation)
	copy(b[24:], h.JobTag[:])
	copy(b[24+JobTagSize:], h.Nonce[:])
	b[24+JobTagSize+NonceSize] = h.Frames
	return b
}

// VersionError is ParseHello's error for a Hello of another protocol
// version. Every version's Hello starts with its version number (2 bytes),
// whatever its length, so a rank of another ringtail release is told
// apart from a malformed Hello; the version is all it says.
type VersionError struct {
	// Peer is the version the Hello names; Local is Version.
	Peer, Local uint16
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("the peer speaks ringtail protocol version %d, this rank version %d: ringtail versions differ across ranks; upgrade every rank to the same release",
		e.Peer, e.Local)
}

// ParseHello decodes and validates a Hello payload. A Hello of another
// protocol version is a *VersionError, whatever its length.
func ParseHello(p []byte) (Hello, error) {
	var h Hello
	if len(p) >= 2 && le.Uint16(p) != Version {
		return h, &VersionError{Peer: le.Uint16(p), Local: Version}
	}
	if len(p) != HelloSize {
		return h, fmt.Errorf("%w: hello of %d bytes, want %d (another protocol version?)", ErrMalformed, len(p), HelloSize)
	}
	h.Version = le.Uint16(p)
	h.Channel = le.Uint16(p[2:])
	h.Rank = le.Uint32(p[4:])
	h.Peer = le.Uint32(p[8:])
	h.World = le.Uint32(p[12:])
	h.Generation = le.Uint64(p[16:])
	copy(h.JobTag[:], p[24:])
	copy(h.Nonce[:], p[24+JobTagSize:])
	h.Frames = p[24+JobTagSize+NonceSize]
	if h.Frames > MaxFrames || p[HelloSize-1] != 0 {
		return h, fmt.Errorf("%w: hello with frame protection %d (reserved byte %d)", ErrMalformed, h.Frames, p[HelloSize-1])
	}
	if h.World == 0 || h.Rank >= h.World || h.Peer >= h.World {
		return h, fmt.Errorf("%w: hello from rank %d to %d in world %d", ErrMalformed, h.Rank, h.Peer, h.World)
	}
	return h, nil
}

// Challenge answers a Hello: the listener's nonce and its proof of the secret.
type Challenge struct {
	Nonce [NonceSize]byte
	MAC   [MACSize]byte
}

// Marshal encodes the Challenge.
func (c *Challenge) Marshal() []byte {
	b := make([]byte, NonceSize+MACSize)
	copy(b, c.Nonce[:])
	copy(b[NonceSize:], c.MAC[:])
	return b
}

// ParseChallenge decodes a Challenge payload.
func ParseChallenge(p []byte) (Challenge, error) {
	var c Challenge
	if len(p) != NonceSize+MACSize {
		return c, fmt.Errorf("%w: challenge of %d bytes", ErrMalformed, len(p))
	}
	copy(c.Nonce[:], p)
	copy(c.MAC[:], p[NonceSize:])
	return c, nil
}

// ParseResponse decodes the dialer's proof of the secret.
func ParseResponse(p []byte) ([MACSize]byte, error) {
	var m [MACSize]byte
	if len(p) != MACSize {
		return m, fmt.Errorf("%w: response of %d bytes", ErrMalformed, len(p))
	}
	copy(m[:], p)
	return m, nil
}

// Verdict ends the handshake: accepted, or refused with a reason.
type Verdict struct {
	OK     bool
	Reason string
}

// Marshal encodes the Verdict, truncating an over-long reason.
func (v *Verdict) Marshal() []byte {
	r := v.Reason
	if len(r) > MaxReason {
		r = r[:MaxReason]
		for !utf8.ValidString(r) {
			r = r[:len(r)-1]
		}
	}
	b := make([]byte, 1+len(r))
	if v.OK {
		b[0] = 1
	}
	copy(b[1:], r)
	return b
}

// ParseVerdict decodes a Verdict payload.
func ParseVerdict(p []byte) (Verdict, error) {
	if len(p) < 1 || p[0] > 1 || len(p) > 1+MaxReason || !utf8.Valid(p[1:]) {
		return Verdict{}, fmt.Errorf("%w: verdict of %d bytes", ErrMalformed, len(p))
	}
	return Verdict{OK: p[0] == 1, Reason: string(p[1:])}, nil
}
