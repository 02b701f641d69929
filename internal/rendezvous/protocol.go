package rendezvous

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// MaxMessage bounds one protocol message after authentication (a
// member's registration, the table).
const MaxMessage = 4 << 20

// MaxHandshakeMessage bounds each message a client sends before it has
// proved the job secret (the server's hello and the client's auth): all
// a stranger can make the server buffer.
const MaxHandshakeMessage = 1 << 10

// ProtocolVersion is the rendezvous protocol version, carried in auth. 2
// split the registration into a small authenticated header (auth) and the
// member record read after it.
const ProtocolVersion = 2

// Member is one rank's registration as every rank receives it.
type Member struct {
	Rank     int               `json:"rank"`
	Endpoint json.RawMessage   `json:"endpoint"`
	Settings map[string]string `json:"settings,omitempty"`
}

type serverHello struct {
	Nonce []byte `json:"nonce"`
}

// auth is a client's first message: who it is, and the size and SHA-256
// of the member record that follows once the server has checked the MAC,
// which covers every field.
type auth struct {
	Version int    `json:"v"`
	Job     string `json:"job"`
	Group   string `json:"group"`
	World   int    `json:"world"`
	Rank    int    `json:"rank"`
	Nonce   []byte `json:"nonce"`
	Size    int    `json:"size"`
	Digest  []byte `json:"digest"`
	MAC     []byte `json:"mac"`
}

// authAck answers auth: OK (send the member record) or why not.
type authAck struct {
	OK    bool   `json:"ok,omitempty"`
	Error string `json:"error,omitempty"`
}

// maxAckMessage bounds authAck (a refusal may quote two job ids).
const maxAckMessage = 4 * MaxHandshakeMessage

type reply struct {
	Error   string   `json:"error,omitempty"`
	MAC     []byte   `json:"mac,omitempty"`
	Members []Member `json:"members,omitempty"`
}

func clientMAC(secret, serverNonce []byte, a *auth) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("ringtail/rendezvous/client/v2\x00"))
	h.Write(serverNonce)
	h.Write(a.Nonce)
	h.Write([]byte(strconv.Itoa(a.Version) + "\x00" + a.Job + "\x00" + a.Group + "\x00" + strconv.Itoa(a.World) + "\x00" +
		strconv.Itoa(a.Rank) + "\x00" + strconv.Itoa(a.Size) + "\x00"))
	h.Write(a.Digest)
	return h.Sum(nil)
}

func serverMAC(secret, clientNonce, serverNonce []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("ringtail/rendezvous/server\x00"))
	h.Write(clientNonce)
	h.Write(serverNonce)
	return h.Sum(nil)
}

func writeMsg(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeRaw(w, b, MaxMessage)
}

// writeRaw writes one length-prefixed message of at most limit bytes.
func writeRaw(w io.Writer, b []byte, limit int) error {
	if len(b) > limit {
		return fmt.Errorf("rendezvous: message of %d bytes exceeds %d", len(b), limit)
	}
	out := make([]byte, 4+len(b))
	binary.LittleEndian.PutUint32(out, uint32(len(b)))
	copy(out[4:], b)
	_, err := w.Write(out)
	return err
}

// readMsg reads one message of at most limit bytes into v; it allocates
// only what the length prefix announces, after checking it against limit.
func readMsg(r io.Reader, v any, limit int) error {
	b, err := readRaw(r, limit)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func readRaw(r io.Reader, limit int) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if uint64(n) > uint64(limit) {
		return nil, fmt.Errorf("rendezvous: message of %d bytes exceeds %d", n, limit)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}
