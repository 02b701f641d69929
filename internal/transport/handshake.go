package transport

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/ringtail-ml/ringtail/internal/wire"
)

// Identity is what a rank proves about itself when it connects: the job,
// its rank in a world of a given size, the membership generation, and
// knowledge of the job secret (never sent; used as the HMAC key).
type Identity struct {
	JobID      string
	Rank       int
	World      int
	Generation uint64
	Secret     []byte
}

// Validate checks the identity's fields.
func (id Identity) Validate() error {
	switch {
	case id.World <= 0:
		return fmt.Errorf("transport: world size %d must be positive", id.World)
	case id.Rank < 0 || id.Rank >= id.World:
		return fmt.Errorf("transport: rank %d outside world of %d", id.Rank, id.World)
	case len(id.JobID) == 0 || len(id.JobID) > wire.MaxJobID:
		return fmt.Errorf("transport: job id must be 1..%d bytes, got %d", wire.MaxJobID, len(id.JobID))
	}
	return nil
}

// ErrAuth is wrapped by every authentication failure.
var ErrAuth = errors.New("authentication failed")

func mac(secret []byte, role string, hello []byte, nonce []byte) [wire.MACSize]byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("ringtail/v1/" + role + "\x00"))
	h.Write(hello)
	h.Write(nonce)
	var out [wire.MACSize]byte
	copy(out[:], h.Sum(nil))
	return out
}

func deadlineFrom(ctx context.Context, conn net.Conn, limit time.Duration) func() {
	dl := time.Now().Add(limit)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	_ = conn.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	return func() {
		stop()
		_ = conn.SetDeadline(time.Time{})
	}
}

// HandshakeTimeout bounds one handshake when the context allows longer.
const HandshakeTimeout = 10 * time.Second

// DialHandshake authenticates a freshly dialed connection to rank peer on
// the given channel. Both sides prove the secret (HMAC-SHA256 challenge–
// response over both nonces and the whole Hello), so neither a stranger nor
// an impostor listener is ever sent a data frame.
func DialHandshake(ctx context.Context, conn net.Conn, id Identity, peer, channel int) error {
	defer deadlineFrom(ctx, conn, HandshakeTimeout)()
	hello := wire.Hello{Version: wire.Version, Channel: uint16(channel), Rank: uint32(id.Rank), Peer: uint32(peer),
		World: uint32(id.World), Generation: id.Generation, JobID: id.JobID}
	if _, err := rand.Read(hello.Nonce[:]); err != nil {
		return err
	}
	hb := hello.Marshal()
	if err := wire.WriteControl(conn, wire.TypeHello, hb); err != nil {
		return fmt.Errorf("send hello to rank %d: %w", peer, err)
	}
	t, p, err := wire.ReadAnyControl(conn)
	if err != nil {
		return fmt.Errorf("read challenge from rank %d: %w", peer, err)
	}
	if t == wire.TypeVerdict {
		v, err := wire.ParseVerdict(p)
		if err != nil {
			return err
		}
		return fmt.Errorf("%w: rank %d refused us: %s", ErrAuth, peer, v.Reason)
	}
	if t != wire.TypeChallenge {
		return fmt.Errorf("%w: got %v frame from rank %d, want challenge", wire.ErrMalformed, t, peer)
	}
	ch, err := wire.ParseChallenge(p)
	if err != nil {
		return err
	}
	if want := mac(id.Secret, "listener", hb, ch.Nonce[:]); !hmac.Equal(want[:], ch.MAC[:]) {
		return fmt.Errorf("%w: rank %d at %s does not know the job secret", ErrAuth, peer, conn.RemoteAddr())
	}
	resp := mac(id.Secret, "dialer", hb, ch.Nonce[:])
	if err := wire.WriteControl(conn, wire.TypeResponse, resp[:]); err != nil {
		return fmt.Errorf("send response to rank %d: %w", peer, err)
	}
	p, err = wire.ReadControl(conn, wire.TypeVerdict)
	if err != nil {
		return fmt.Errorf("read verdict from rank %d: %w", peer, err)
	}
	v, err := wire.ParseVerdict(p)
	if err != nil {
		return err
	}
	if !v.OK {
		return fmt.Errorf("%w: rank %d refused us: %s", ErrAuth, peer, v.Reason)
	}
	return nil
}

// AcceptHandshake authenticates a connection accepted by rank id.Rank. It
// returns the dialer's Hello; on any failure it has already told the dialer
// why (when the dialer got that far) and the caller should close the
// connection and log the refusal with conn.RemoteAddr().
func AcceptHandshake(ctx context.Context, conn net.Conn, id Identity) (wire.Hello, error) {
	defer deadlineFrom(ctx, conn, HandshakeTimeout)()
	p, err := wire.ReadControl(conn, wire.TypeHello)
	if err != nil {
		return wire.Hello{}, fmt.Errorf("read hello: %w", err)
	}
	hello, err := wire.ParseHello(p)
	if err != nil {
		return hello, err
	}
	refuse := func(format string, args ...any) (wire.Hello, error) {
		reason := fmt.Sprintf(format, args...)
		v := wire.Verdict{Reason: reason}
		_ = wire.WriteControl(conn, wire.TypeVerdict, v.Marshal())
		return hello, fmt.Errorf("%w: %s", ErrAuth, reason)
	}
	switch {
	case hello.Version != wire.Version:
		return refuse("protocol version %d, want %d", hello.Version, wire.Version)
	case hello.JobID != id.JobID:
		return refuse("job %q, this is job %q", hello.JobID, id.JobID)
	case int(hello.World) != id.World:
		return refuse("world size %d, this job has %d", hello.World, id.World)
	case int(hello.Peer) != id.Rank:
		return refuse("dialed rank %d but reached rank %d", hello.Peer, id.Rank)
	case hello.Generation != id.Generation:
		return refuse("generation %d, this rank is at generation %d", hello.Generation, id.Generation)
	}
	var ch wire.Challenge
	if _, err := rand.Read(ch.Nonce[:]); err != nil {
		return hello, err
	}
	ch.MAC = mac(id.Secret, "listener", p, ch.Nonce[:])
	if err := wire.WriteControl(conn, wire.TypeChallenge, ch.Marshal()); err != nil {
		return hello, fmt.Errorf("send challenge: %w", err)
	}
	rp, err := wire.ReadControl(conn, wire.TypeResponse)
	if err != nil {
		return hello, fmt.Errorf("read response: %w", err)
	}
	got, err := wire.ParseResponse(rp)
	if err != nil {
		return hello, err
	}
	if want := mac(id.Secret, "dialer", p, ch.Nonce[:]); !hmac.Equal(want[:], got[:]) {
		return refuse("rank %d does not know the job secret", hello.Rank)
	}
	ok := wire.Verdict{OK: true}
	if err := wire.WriteControl(conn, wire.TypeVerdict, ok.Marshal()); err != nil {
		return hello, fmt.Errorf("send verdict: %w", err)
	}
	return hello, nil
}
