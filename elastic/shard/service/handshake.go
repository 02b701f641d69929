package service

import (
	"crypto/hmac"
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
	if err := readMsg(rw, &ch); err != nil {
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
	if err := readMsg(rw, &w); err != nil {
		return err
	}
	if !w.OK {
		if e := fromWire(w.Error); e != nil {
			return fmt.Errorf("%w: %v", ErrAuth, e)
		}
		return ErrAuth
	}
	return nil
}

// serverHandshake authenticates both ends over rw as the server. On a bad
// client proof it tells the client before failing.
func serverHandshake(rw io.ReadWriter, secret []byte) error {
	var h hello
	if err := readMsg(rw, &h); err != nil {
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
	if err := readMsg(rw, &a); err != nil {
		return err
	}
	if a.Abort != "" {
		return fmt.Errorf("%w: client rejected our proof (%s): secrets differ", ErrAuth, a.Abort)
	}
	if !hmac.Equal(a.Proof, proof(secret, "client", ns, h.Nonce)) {
		writeMsg(rw, welcome{Error: &wireError{Code: "auth", Message: "bad job secret"}})
		return fmt.Errorf("%w: client proof does not match the job secret", ErrAuth)
	}
	return writeMsg(rw, welcome{OK: true})
}
