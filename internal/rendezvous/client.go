package rendezvous

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"
)

// Request is one rank's registration.
type Request struct {
	Addr   string // coordinator host:port
	JobID  string
	Secret []byte
	World  int
	Group  string // e.g. the generation; ranks of one communicator use the same
	Member Member
	// Dial connects to Addr; nil means TCP. The libp2p control plane sets
	// it to a Noise-secured stream to the coordinator's derived identity.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
}

// ErrRefused is wrapped when the coordinator refuses a registration.
var ErrRefused = errors.New("rendezvous refused")

// Register registers with the coordinator (retrying while it is not yet
// listening) and returns every member of the group, by rank, once all
// have registered. It honours ctx's deadline.
func Register(ctx context.Context, req Request) ([]Member, error) {
	backoff := 20 * time.Millisecond
	for {
		members, err := registerOnce(ctx, req)
		if err == nil || errors.Is(err, ErrRefused) {
			return members, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("rendezvous with %s: %w (last error: %v)", req.Addr, ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

func registerOnce(ctx context.Context, req Request) ([]Member, error) {
	dial := req.Dial
	if dial == nil {
		var d net.Dialer
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	c, err := dial(ctx, req.Addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	var hello serverHello
	if err := readMsg(c, &hello, MaxHandshakeMessage); err != nil {
		return nil, err
	}
	body, err := json.Marshal(req.Member)
	if err != nil {
		return nil, fmt.Errorf("rendezvous: encoding the registration: %w", err)
	}
	if len(body) > MaxMessage {
		return nil, fmt.Errorf("%w: registration of %d bytes exceeds %d", ErrRefused, len(body), MaxMessage)
	}
	digest := sha256.Sum256(body)
	a := auth{Version: ProtocolVersion, Job: req.JobID, Group: req.Group, World: req.World, Rank: req.Member.Rank,
		Nonce: make([]byte, 32), Size: len(body), Digest: digest[:]}
	_, _ = rand.Read(a.Nonce)
	a.MAC = clientMAC(req.Secret, hello.Nonce, &a)
	head, err := json.Marshal(&a)
	if err != nil {
		return nil, fmt.Errorf("rendezvous: encoding auth: %w", err)
	}
	if len(head) > MaxHandshakeMessage {
		return nil, fmt.Errorf("%w: job id %q and group %q are too long for the %d-byte handshake", ErrRefused, req.JobID, req.Group, MaxHandshakeMessage)
	}
	if err := writeRaw(c, head, MaxHandshakeMessage); err != nil {
		return nil, err
	}
	// The server reads the record only once the MAC checks out: it says
	// so (or why not) first.
	var ack authAck
	if err := readMsg(c, &ack, maxAckMessage); err != nil {
		return nil, err
	}
	if !ack.OK {
		if ack.Error == "" {
			ack.Error = "registration not accepted"
		}
		return nil, fmt.Errorf("%w: %s", ErrRefused, ack.Error)
	}
	if err := writeRaw(c, body, MaxMessage); err != nil {
		return nil, err
	}
	var r reply
	if err := readMsg(c, &r, MaxMessage); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: waiting for all %d ranks to register", ctx.Err(), req.World)
		}
		return nil, err
	}
	if r.Error != "" {
		return nil, fmt.Errorf("%w: %s", ErrRefused, r.Error)
	}
	if !hmac.Equal(r.MAC, serverMAC(req.Secret, a.Nonce, hello.Nonce)) {
		return nil, fmt.Errorf("%w: coordinator at %s does not know the job secret", ErrRefused, req.Addr)
	}
	if len(r.Members) != req.World {
		return nil, fmt.Errorf("%w: coordinator returned %d members for a world of %d", ErrRefused, len(r.Members), req.World)
	}
	for i, m := range r.Members {
		if m.Rank != i {
			return nil, fmt.Errorf("%w: member %d has rank %d", ErrRefused, i, m.Rank)
		}
	}
	return r.Members, nil
}
