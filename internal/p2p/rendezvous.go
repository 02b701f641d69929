package p2p

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/admit"
	"github.com/ringtail-ml/ringtail/internal/rendezvous"
)

// CoordinatorConfig configures the coordinator's libp2p listener.
type CoordinatorConfig struct {
	// JobID and Secret are the job's; together they determine the
	// coordinator's identity (CoordinatorKey).
	JobID  string
	Secret []byte
	// ListenIP is the IP to listen on ("" = 127.0.0.1; 0.0.0.0 or :: bind
	// every interface).
	ListenIP string
	// Port is MASTER_PORT (0 = ephemeral, for tests).
	Port int
	// HandshakeTimeout, MaxPending and MaxPendingPerSource bound the
	// connections that have not proved the job secret, as
	// rendezvous.ServerConfig's fields of the same names do for its
	// streams (0: internal/admit's defaults).
	HandshakeTimeout                time.Duration
	MaxPending, MaxPendingPerSource int
	// Logger receives the refused connections (rate-limited, at warn).
	Logger zerolog.Logger
}

// maxCoordinatorStreams bounds the streams one connection may hold open to
// the coordinator: a rank needs one at a time (plus retries).
const maxCoordinatorStreams = 16

// Validate checks the configuration.
func (c *CoordinatorConfig) Validate() error {
	switch {
	case c.JobID == "":
		return errors.New("p2p: coordinator needs a job id")
	case len(c.Secret) == 0:
		return errors.New("p2p: coordinator needs a job secret")
	case c.Port < 0 || c.Port > 65535:
		return fmt.Errorf("p2p: coordinator port %d outside 0..65535", c.Port)
	case c.HandshakeTimeout < 0 || c.MaxPending < 0 || c.MaxPendingPerSource < 0:
		return errors.New("p2p: negative coordinator handshake timeout or connection limit")
	}
	return nil
}

// ListenCoordinator starts a host with the identity derived from the job
// secret and id (CoordinatorKey) and returns a listener for
// RendezvousProtocol streams to pass to rendezvous.Server.Serve. Closing the
// listener, as Serve does when its context ends, closes the host.
func ListenCoordinator(cfg CoordinatorConfig) (*Listener, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	key, err := CoordinatorKey(cfg.Secret, cfg.JobID)
	if err != nil {
		return nil, err
	}
	gate, err := admit.New(admit.Config{
		Name: "rendezvous/libp2p", MaxPending: cfg.MaxPending, MaxPendingPerSource: cfg.MaxPendingPerSource,
		Deadline: cfg.HandshakeTimeout, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("p2p: %w", err)
	}
	h, err := NewHost(HostConfig{Key: key, ListenIP: cfg.ListenIP, Port: cfg.Port, Gate: gate, MaxInboundStreams: maxCoordinatorStreams})
	if err != nil {
		return nil, err
	}
	l, err := h.Listen(RendezvousProtocol)
	if err != nil {
		h.Close()
		return nil, err
	}
	l.owned = true
	return l, nil
}

// CoordinatorAddr is where a rank reaches the coordinator:
// /ip4/MASTER_ADDR/tcp/MASTER_PORT/p2p/<CoordinatorID> (/ip6 for an IPv6
// address, /dns for a host name), computed from the job secret and id alone.
func CoordinatorAddr(masterAddr string, masterPort int, secret []byte, jobID string) (ma.Multiaddr, error) {
	id, err := CoordinatorID(secret, jobID)
	if err != nil {
		return nil, err
	}
	if masterPort <= 0 || masterPort > 65535 {
		return nil, fmt.Errorf("p2p: coordinator port %d outside 1..65535", masterPort)
	}
	fam := "dns"
	if ip := net.ParseIP(masterAddr); ip != nil {
		fam = "ip6"
		if ip.To4() != nil {
			fam = "ip4"
		}
	} else if masterAddr == "" {
		return nil, errors.New("p2p: empty coordinator address")
	}
	a, err := ma.NewMultiaddr("/" + fam + "/" + masterAddr + "/tcp/" + strconv.Itoa(masterPort) + "/p2p/" + id.String())
	if err != nil {
		return nil, fmt.Errorf("p2p: coordinator address: %w", err)
	}
	return a, nil
}

// DialRendezvous opens a RendezvousProtocol stream to the coordinator at
// addr (a multiaddr ending in /p2p/<CoordinatorID>, as CoordinatorAddr
// makes). A coordinator that cannot present the derived key is an impostor:
// Noise refuses it and the error wraps rendezvous.ErrRefused, so callers
// stop retrying. Its signature is that of a dial hook on
// rendezvous.Request (see docs/libp2p.md).
func (h *Host) DialRendezvous(ctx context.Context, addr string) (net.Conn, error) {
	a, err := ma.NewMultiaddr(addr)
	if err != nil {
		return nil, fmt.Errorf("p2p: coordinator address %q: %w", addr, err)
	}
	c, err := h.Dial(ctx, a, RendezvousProtocol)
	if err != nil && isPeerMismatch(err) {
		return nil, fmt.Errorf("%w: the peer at %s does not hold the job's coordinator key (wrong job secret or id, or an impostor): %w", rendezvous.ErrRefused, addr, err)
	}
	if err != nil && speaksOtherProtocol(err) {
		return nil, fmt.Errorf("%w: the coordinator at %s does not speak libp2p (a tcp coordinator? every rank and the coordinator need the same control plane): %w", rendezvous.ErrRefused, addr, err)
	}
	return c, err
}

// speaksOtherProtocol reports whether a dial failed because the peer
// answered the security negotiation with something other than libp2p (a
// tcp coordinator's hello, say), as opposed to hanging up: a coordinator
// shedding unauthenticated connections under a flood closes them, and
// that is worth retrying.
func speaksOtherProtocol(err error) bool {
	msg := err.Error()
	if !strings.Contains(msg, "failed to negotiate security protocol") {
		return false
	}
	for _, transient := range []string{"EOF", "connection reset", "broken pipe", "use of closed network connection", "deadline exceeded", "timeout"} {
		if strings.Contains(msg, transient) {
			return false
		}
	}
	return true
}

// Register registers with the coordinator at req.Addr (a multiaddr, as
// CoordinatorAddr makes) over libp2p: rendezvous.Register with its dial
// hook set to h.DialRendezvous. It retries while the coordinator is not yet
// listening and fails at once, wrapping rendezvous.ErrRefused, when the
// peer there is not the coordinator.
func Register(ctx context.Context, h *Host, req rendezvous.Request) ([]rendezvous.Member, error) {
	if _, err := ma.NewMultiaddr(req.Addr); err != nil {
		return nil, fmt.Errorf("p2p: coordinator address %q: %w", req.Addr, err)
	}
	req.Dial = h.DialRendezvous
	return rendezvous.Register(ctx, req)
}
