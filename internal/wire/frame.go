package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// HeaderSize is the size of a frame header in bytes.
const HeaderSize = 32

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
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// ErrMalformed is wrapped by every decoding error, so callers can tell a
// protocol violation from an I/O failure with errors.Is.
var ErrMalformed = errors.New("malformed frame")

// Header is a decoded frame header.
type Header struct {
	Type    Type
	Kind    uint8
	DType   uint8
	RedOp   uint8
	Channel uint16
	Seq     uint32
	Root    uint32
	Count   uint64
	Len     uint32
}

// Put encodes h into b, which must be at least HeaderSize bytes.
func (h *Header) Put(b []byte) {
	_ = b[HeaderSize-1]
	b[0] = byte(h.Type)
	b[1] = 0
	b[2] = h.Kind
	b[3] = h.DType
	b[4] = h.RedOp
	b[5] = 0
	binary.LittleEndian.PutUint16(b[6:], h.Channel)
	binary.LittleEndian.PutUint32(b[8:], h.Seq)
	binary.LittleEndian.PutUint32(b[12:], h.Root)
	binary.LittleEndian.PutUint64(b[16:], h.Count)
	binary.LittleEndian.PutUint32(b[24:], h.Len)
	binary.LittleEndian.PutUint32(b[28:], 0)
}

// ParseHeader decodes and validates a header: a known type, zero reserved
// fields and a payload length within that type's limit.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: header of %d bytes, want %d", ErrMalformed, len(b), HeaderSize)
	}
	h := Header{
		Type:    Type(b[0]),
		Kind:    b[2],
		DType:   b[3],
		RedOp:   b[4],
		Channel: binary.LittleEndian.Uint16(b[6:]),
		Seq:     binary.LittleEndian.Uint32(b[8:]),
		Root:    binary.LittleEndian.Uint32(b[12:]),
		Count:   binary.LittleEndian.Uint64(b[16:]),
		Len:     binary.LittleEndian.Uint32(b[24:]),
	}
	if h.Type < TypeData || h.Type > TypeVerdict {
		return Header{}, fmt.Errorf("%w: unknown type %d", ErrMalformed, b[0])
	}
	if b[1] != 0 || b[5] != 0 || binary.LittleEndian.Uint32(b[28:]) != 0 {
		return Header{}, fmt.Errorf("%w: reserved bits set in %v header", ErrMalformed, h.Type)
	}
	limit := uint32(MaxControlPayload)
	if h.Type == TypeData {
		limit = MaxDataPayload
	}
	if h.Len > limit {
		return Header{}, fmt.Errorf("%w: %v payload of %d bytes exceeds limit %d", ErrMalformed, h.Type, h.Len, limit)
	}
	if h.Type == TypeHeartbeat && h.Len != 0 {
		return Header{}, fmt.Errorf("%w: heartbeat with %d payload bytes", ErrMalformed, h.Len)
	}
	return h, nil
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
		return 0, nil, fmt.Errorf("%w: data frame during the handshake", ErrMalformed)
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
