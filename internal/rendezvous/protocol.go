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

// MaxMessage bounds one protocol message.
const MaxMessage = 4 << 20

// Member is one rank's registration as every rank receives it.
type Member struct {
	Rank     int               `json:"rank"`
	Endpoint json.RawMessage   `json:"endpoint"`
	Settings map[string]string `json:"settings,omitempty"`
}

type serverHello struct {
	Nonce []byte `json:"nonce"`
}

type register struct {
	Job    string `json:"job"`
	Group  string `json:"group"`
	World  int    `json:"world"`
	Nonce  []byte `json:"nonce"`
	MAC    []byte `json:"mac"`
	Member Member `json:"member"`
}

type reply struct {
	Error   string   `json:"error,omitempty"`
	MAC     []byte   `json:"mac,omitempty"`
	Members []Member `json:"members,omitempty"`
}

func clientMAC(secret, serverNonce []byte, r *register) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("ringtail/rendezvous/client\x00"))
	h.Write(serverNonce)
	h.Write(r.Nonce)
	h.Write([]byte(r.Job + "\x00" + r.Group + "\x00" + strconv.Itoa(r.World) + "\x00" + strconv.Itoa(r.Member.Rank) + "\x00"))
	h.Write(r.Member.Endpoint)
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
	if len(b) > MaxMessage {
		return fmt.Errorf("rendezvous: message of %d bytes exceeds %d", len(b), MaxMessage)
	}
	out := make([]byte, 4+len(b))
	binary.LittleEndian.PutUint32(out, uint32(len(b)))
	copy(out[4:], b)
	_, err = w.Write(out)
	return err
}

func readMsg(r io.Reader, v any) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if n > MaxMessage {
		return fmt.Errorf("rendezvous: message of %d bytes exceeds %d", n, MaxMessage)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
