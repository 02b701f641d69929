package rendezvous

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
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
	if err := readMsg(c, &hello); err != nil {
		return nil, err
	}
	reg := register{Job: req.JobID, Group: req.Group, World: req.World, Member: req.Member, Nonce: make([]byte, 32)}
	_, _ = rand.Read(reg.Nonce)
	reg.MAC = clientMAC(req.Secret, hello.Nonce, &reg)
	if err := writeMsg(c, &reg); err != nil {
		return nil, err
	}
	var r reply
	if err := readMsg(c, &r); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: waiting for all %d ranks to register", ctx.Err(), req.World)
		}
		return nil, err
	}
	if r.Error != "" {
		return nil, fmt.Errorf("%w: %s", ErrRefused, r.Error)
	}
	if !hmac.Equal(r.MAC, serverMAC(req.Secret, reg.Nonce, hello.Nonce)) {
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
