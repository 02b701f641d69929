package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// HeaderSize is the size of a frame header in bytes.
const HeaderSize = 48

// le is the byte order of every field.
var le = binary.LittleEndian

// Limits on payload sizes, checked before anything is read or allocated.
const (
	// MaxDataPayload bounds one Data frame; senders split larger transfers.
	MaxDataPayload = 64 << 20
	// MaxControlPayload bounds every non-Data frame.
	MaxControlPayload = 4096
)

// Type is a frame type.
type Type uint8

// Frame types.
const (
	TypeData Type = iota + 1
	TypeHeartbeat
	TypeAbort
	TypeHello
	TypeChallenge
	TypeResponse
	TypeVerdict
	// TypeQuery asks the peer what it is doing: sent by a rank that has
	// waited long on the peer; the payload is the asker's Desc.
	TypeQuery
	// TypeState answers a Query (see State).
	TypeState
	maxType = TypeState
)

func (t Type) String() string {
	switch t {
	case TypeData:
		return "data"
	case TypeHeartbeat:
		return "heartbeat"
	case TypeAbort:
		return "abort"
	case TypeHello:
		return "hello"
	case TypeChallenge:
		return "challenge"
	case TypeResponse:
		return "response"
	case TypeVerdict:
		return "verdict"
	case TypeQuery:
		return "query"
	case TypeState:
		return "state"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// ErrMalformed is wrapped by every decoding error, so callers can tell a
// protocol violation from an I/O failure with errors.Is.
var ErrMalformed = errors.New("malformed frame")

// Flags are the bits of a frame header's second byte.
type Flags uint8

// FlagS2 marks a Data frame of an Eager message whose payload is one s2
// block (github.com/klauspost/compress/s2) instead of the plain bytes: the
// block starts with its decoded length, which must fit in what remains of
// the message (DecodeS2). The frames of one message may mix plain and
// compressed payloads. No other frame may carry it.
const FlagS2 Flags = 1 << 0

// Header is a decoded frame header. Data frames carry their call's Desc;
// other frames carry a zero Desc.
type Header struct {
	Type Type
	// Flags is zero but on the compressed frames of an eager message
	// (FlagS2).
	Flags   Flags
	Channel uint16
	Len     uint32
	// Seq numbers the messages of one direction of one link (a message
	// is one or more Data frames), so a lost or extra message is caught
	// even between calls of different groups.
	Seq  uint32
	Desc Desc
}

// Put encodes h into b, which must be at least HeaderSize bytes.
func (h *Header) Put(b []byte) {
	_ = b[HeaderSize-1]
	b[0] = byte(h.Type)
	b[1] = byte(h.Flags)
	le.PutUint16(b[2:], h.Channel)
	le.PutUint32(b[4:], h.Len)
	le.PutUint32(b[8:], h.Seq)
	le.PutUint32(b[12:], 0)
	PutDesc(b[16:], &h.Desc)
}

// ParseHeader decodes and validates a header: a known type, zero reserved
// fields, flags only where they belong (FlagS2 on an eager Data frame), a
// known collective on Data frames (a zero Desc on the others) and a
// payload length within that type's limit.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: header of %d bytes, want %d", ErrMalformed, len(b), HeaderSize)
	}
	h := Header{
		Type:    Type(b[0]),
		Flags:   Flags(b[1]),
		Channel: le.Uint16(b[2:]),
		Len:     le.Uint32(b[4:]),
		Seq:     le.Uint32(b[8:]),
		Desc:    GetDesc(b[16:]),
	}
	if h.Type < TypeData || h.Type > maxType {
		return Header{}, fmt.Errorf("%w: unknown type %d", ErrMalformed, b[0])
	}
	if le.Uint32(b[12:]) != 0 || b[16+3] != 0 {
		return Header{}, fmt.Errorf("%w: reserved bits set in %v header", ErrMalformed, h.Type)
	}
	if h.Flags != 0 && (h.Flags != FlagS2 || h.Type != TypeData || h.Desc.Collective != Eager) {
		return Header{}, fmt.Errorf("%w: flags %#x on a %v header (only eager data frames may be compressed)", ErrMalformed, b[1], h.Type)
	}
	limit := uint32(MaxControlPayload)
	if h.Type == TypeData {
		limit = MaxDataPayload
		if !h.Desc.Collective.Valid() {
			return Header{}, fmt.Errorf("%w: data frame of unknown collective %d", ErrMalformed, b[16])
		}
	} else if h.Desc != (Desc{}) || h.Seq != 0 || h.Channel != 0 {
		return Header{}, fmt.Errorf("%w: %v header with data-frame fields", ErrMalformed, h.Type)
	}
	if h.Len > limit {
		return Header{}, fmt.Errorf("%w: %v payload of %d bytes exceeds limit %d", ErrMalformed, h.Type, h.Len, limit)
	}
	if lo, hi := controlLen(h.Type); h.Type != TypeData && (h.Len < lo || h.Len > hi) {
		return Header{}, fmt.Errorf("%w: %v payload of %d bytes, want %d..%d", ErrMalformed, h.Type, h.Len, lo, hi)
	}
	return h, nil
}

// controlLen bounds the payload of a frame type that is only sent after
// the handshake and has a fixed shape: a heartbeat is empty, a Query and a
// State have one size, an Abort at least its fixed fields. The handshake's
// frames keep the general limit (a Hello of another protocol version has
// another length, and must still parse far enough to be named).
func controlLen(t Type) (lo, hi uint32) {
	switch t {
	case TypeHeartbeat:
		return 0, 0
	case TypeQuery:
		return QuerySize, QuerySize
	case TypeState:
		return StateSize, StateSize
	case TypeAbort:
		return abortFixed, MaxControlPayload
	}
	return 0, MaxControlPayload
}

// ReadHeader reads and validates one header from r into the caller's
// scratch buffer (so the hot path does not allocate).
func ReadHeader(r io.Reader, scratch *[HeaderSize]byte) (Header, error) {
	if _, err := io.ReadFull(r, scratch[:]); err != nil {
		return Header{}, err
	}
	return ParseHeader(scratch[:])
}

// WriteControl writes a non-Data frame with a small payload in one write.
func WriteControl(w io.Writer, t Type, payload []byte) error {
	if len(payload) > MaxControlPayload {
		return fmt.Errorf("wire: %v payload of %d bytes exceeds limit %d", t, len(payload), MaxControlPayload)
	}
	b := make([]byte, HeaderSize+len(payload))
	h := Header{Type: t, Len: uint32(len(payload))}
	h.Put(b)
	copy(b[HeaderSize:], payload)
	_, err := w.Write(b)
	return err
}

// ReadAnyControl reads one non-Data frame and returns its type and payload.
// An Abort is returned as an *AbortError.
func ReadAnyControl(r io.Reader) (Type, []byte, error) {
	var scratch [HeaderSize]byte
	h, err := ReadHeader(r, &scratch)
	if err != nil {
		return 0, nil, err
	}
	if h.Type == TypeData {
		return 0, nil, fmt.Errorf("%w: data frame where a control frame belongs", ErrMalformed)
	}
	p := make([]byte, h.Len)
	if _, err := io.ReadFull(r, p); err != nil {
		return 0, nil, err
	}
	if h.Type == TypeAbort {
		a, err := ParseAbort(p)
		if err != nil {
			return 0, nil, err
		}
		return 0, nil, a
	}
	return h.Type, p, nil
}

// ReadControl reads one frame that must be of type want (or an Abort, which
// is returned as an *AbortError) and returns its payload.
func ReadControl(r io.Reader, want Type) ([]byte, error) {
	t, p, err := ReadAnyControl(r)
	if err != nil {
		return nil, err
	}
	if t != want {
		return nil, fmt.Errorf("%w: got %v frame, want %v", ErrMalformed, t, want)
	}
	return p, nil
}
