package service

import (
	"crypto/hmac"
	"errors"
	"fmt"
	"io"
)

// clientHandshake authenticates both ends over rw as the client.
func clientHandshake(rw io.ReadWriter, secret []byte) error {
	nc, err := newNonce()
	if err != nil {
		return err
	}
	if err := writeMsg(rw, hello{Version: ProtocolVersion, Nonce: nc}); err != nil {
		return err
	}
	var ch challenge
	if err := readMsgLimit(rw, &ch, maxHandshakeFrame); err != nil {
		return err
	}
	if ch.Version != ProtocolVersion {
		return fmt.Errorf("%w: server speaks version %d, want %d", ErrProtocol, ch.Version, ProtocolVersion)
	}
	if len(ch.Nonce) != nonceLen {
		return fmt.Errorf("%w: server nonce of %d bytes", ErrProtocol, len(ch.Nonce))
	}
	if !hmac.Equal(ch.Proof, proof(secret, "server", nc, ch.Nonce)) {
		writeMsg(rw, authMsg{Abort: "server proof does not match"})
		return fmt.Errorf("%w: the coordinator's proof does not match this job secret", ErrAuth)
	}
	if err := writeMsg(rw, authMsg{Proof: proof(secret, "client", ch.Nonce, nc)}); err != nil {
		return err
	}
	var w welcome
	if err := readMsgLimit(rw, &w, maxHandshakeFrame); err != nil {
		return err
	}
	if !w.OK {
		e := fromWire(w.Error)
		switch {
		case e == nil:
			return ErrAuth
		case errors.Is(e, ErrUnavailable): // authenticated, but the server is full
			return e
		}
		return fmt.Errorf("%w: %v", ErrAuth, e)
	}
	return nil
}

// serverHandshake authenticates both ends over rw as the server. On a bad
// client proof it tells the client before failing. Once the client's
// proof checks out it calls admitted, and welcomes the client only if
// admitted returns nil (else it sends that error). It reads at most
// maxHandshakeFrame bytes a frame and says nothing about the job.
func serverHandshake(rw io.ReadWriter, secret []byte, admitted func() error) error {
	var h hello
	if err := readMsgLimit(rw, &h, maxHandshakeFrame); err != nil {
		return err
	}
	if h.Version != ProtocolVersion {
		writeMsg(rw, welcome{Error: &wireError{Code: "protocol", Message: fmt.Sprintf("version %d not supported", h.Version)}})
		return fmt.Errorf("%w: client speaks version %d", ErrProtocol, h.Version)
	}
	if len(h.Nonce) != nonceLen {
		return fmt.Errorf("%w: client nonce of %d bytes", ErrProtocol, len(h.Nonce))
	}
	ns, err := newNonce()
	if err != nil {
		return err
	}
	if err := writeMsg(rw, challenge{Version: ProtocolVersion, Nonce: ns, Proof: proof(secret, "server", h.Nonce, ns)}); err != nil {
		return err
	}
	var a authMsg
	if err := readMsgLimit(rw, &a, maxHandshakeFrame); err != nil {
		return err
	}
	if a.Abort != "" {
		return fmt.Errorf("%w: client rejected our proof (%s): secrets differ", ErrAuth, a.Abort)
	}
	if !hmac.Equal(a.Proof, proof(secret, "client", ns, h.Nonce)) {
		writeMsg(rw, welcome{Error: &wireError{Code: "auth", Message: "bad job secret"}})
		return fmt.Errorf("%w: client proof does not match the job secret", ErrAuth)
	}
	if err := admitted(); err != nil {
		writeMsg(rw, welcome{Error: toWire(err)})
		return err
	}
	return writeMsg(rw, welcome{OK: true})
}
