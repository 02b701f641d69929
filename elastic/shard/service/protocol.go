package service

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/ringtail-ml/ringtail/elastic/shard"
	"github.com/ringtail-ml/ringtail/elastic/shard/wal"
	"github.com/ringtail-ml/ringtail/internal/settings"
)

// ProtocolVersion is the control-plane protocol version, checked in the
// handshake.
const ProtocolVersion = 1

// MaxFrameLen bounds every frame's payload.
const MaxFrameLen = 64 << 10

// nonceLen is the size of handshake nonces.
const nonceLen = 32

// MinSecretLen is the shortest accepted job secret (the runtime's,
// settings.MinSecretLen).
const MinSecretLen = settings.MinSecretLen

// Errors of the service layer; shard.ErrNoShard, shard.ErrFinished,
// shard.ErrUnknownShard, shard.ErrNotOwner and shard.ErrInvalidCommand come
// back from the server unchanged (errors.Is works across the wire).
var (
	// ErrAuth means the peer does not know the job secret.
	ErrAuth = errors.New("service: authentication failed")
	// ErrProtocol means a malformed, oversized or unexpected message.
	ErrProtocol = errors.New("service: protocol error")
	// ErrUnavailable means the coordinator could not be reached or the
	// connection broke; the call may or may not have been applied, and
	// retrying on a new connection is safe (at-least-once).
	ErrUnavailable = errors.New("service: coordinator unavailable")
	// ErrClosed means the client was closed.
	ErrClosed = errors.New("service: client closed")
	// ErrNotOpen means no worker has declared the job's data yet
	// (ClientConfig.Job) to a service started without a store.
	ErrNotOpen = errors.New("service: the job's data is not declared yet")
)

// Frame: 4-byte big-endian payload length, then that many bytes of JSON.

func writeMsg(w io.Writer, v any) error {
	p, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(p) > MaxFrameLen {
		return fmt.Errorf("%w: %d-byte message exceeds %d", ErrProtocol, len(p), MaxFrameLen)
	}
	buf := make([]byte, 4+len(p))
	binary.BigEndian.PutUint32(buf, uint32(len(p)))
	copy(buf[4:], p)
	_, err = w.Write(buf)
	return err
}

// maxHandshakeFrame bounds each handshake frame (hello, challenge,
// authMsg, welcome): before a peer proves the secret, this is all the
// memory it can make the server reserve.
const maxHandshakeFrame = 512

func readMsg(r io.Reader, v any) error { return readMsgLimit(r, v, MaxFrameLen) }

// readMsgLimit reads one frame of at most limit bytes into v, allocating
// only after checking the length prefix against limit.
func readMsgLimit(r io.Reader, v any, limit uint32) error {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n > limit {
		return fmt.Errorf("%w: frame of %d bytes exceeds %d", ErrProtocol, n, limit)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return err
	}
	if err := json.Unmarshal(p, v); err != nil {
		return fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	return nil
}

// Handshake messages. The client opens with its nonce; the server answers
// with its nonce and a proof that it knows the secret; the client checks
// it and proves itself; the server accepts or rejects.
type hello struct {
	Version int    `json:"v"`
	Nonce   []byte `json:"nonce"`
}

type challenge struct {
	Version int    `json:"v"`
	Nonce   []byte `json:"nonce"`
	Proof   []byte `json:"proof"`
}

type authMsg struct {
	Proof []byte `json:"proof,omitempty"`
	// Abort is set instead of Proof when the server's proof failed; the
	// client never sends a proof to a server it could not verify (that
	// would let an impostor relay it).
	Abort string `json:"abort,omitempty"`
}

type welcome struct {
	OK    bool       `json:"ok"`
	Error *wireError `json:"error,omitempty"`
}

// proof is HMAC-SHA256(secret, label ‖ role ‖ 0 ‖ first ‖ second). The
// roles differ so a proof can never be reflected back as the other side's.
func proof(secret []byte, role string, first, second []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("ringtail-shard/1 "))
	m.Write([]byte(role))
	m.Write([]byte{0})
	m.Write(first)
	m.Write(second)
	return m.Sum(nil)
}

func newNonce() ([]byte, error) {
	b := make([]byte, nonceLen)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	return b, nil
}

// Requests and responses after the handshake.

// Operation names on the wire.
const (
	opPull  = "pull"
	opDone  = "done"
	opFail  = "fail"
	opStats = "stats"
	opOpen  = "open"
)

type request struct {
	ID     uint64 `json:"id"`
	Op     string `json:"op"`
	Worker string `json:"worker,omitempty"`
	Shard  int64  `json:"shard,omitempty"`
	// Config is the job's data, for opOpen.
	Config *shard.Config `json:"config,omitempty"`
}

type response struct {
	ID        uint64       `json:"id"`
	Shard     *shard.Shard `json:"shard,omitempty"`
	Duplicate bool         `json:"duplicate,omitempty"`
	Stats     *shard.Stats `json:"stats,omitempty"`
	Error     *wireError   `json:"error,omitempty"`
}

// wireError carries an error code the client maps back to a sentinel.
type wireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

var wireCodes = []struct {
	code string
	err  error
}{
	{"no_shard", shard.ErrNoShard},
	{"finished", shard.ErrFinished},
	{"unknown_shard", shard.ErrUnknownShard},
	{"not_owner", shard.ErrNotOwner},
	{"invalid_command", shard.ErrInvalidCommand},
	{"auth", ErrAuth},
	{"protocol", ErrProtocol},
	{"unavailable", ErrUnavailable},
	{"not_open", ErrNotOpen},
	{"config_mismatch", wal.ErrConfigMismatch},
}

func toWire(err error) *wireError {
	if err == nil {
		return nil
	}
	for _, c := range wireCodes {
		if errors.Is(err, c.err) {
			return &wireError{Code: c.code, Message: err.Error()}
		}
	}
	return &wireError{Code: "internal", Message: err.Error()}
}

// remoteError is a server-side error seen by the client; errors.Is matches
// the sentinel of its code.
type remoteError struct {
	code, msg string
	sentinel  error
}

func (e *remoteError) Error() string { return "coordinator: " + e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

func fromWire(w *wireError) error {
	if w == nil {
		return nil
	}
	e := &remoteError{code: w.Code, msg: w.Message}
	for _, c := range wireCodes {
		if c.code == w.Code {
			e.sentinel = c.err
		}
	}
	return e
}
