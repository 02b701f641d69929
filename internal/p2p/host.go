package p2p

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/core/sec"
	"github.com/libp2p/go-libp2p/core/transport"
	"github.com/libp2p/go-libp2p/p2p/host/eventbus"
	"github.com/libp2p/go-libp2p/p2p/host/peerstore/pstoremem"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	tptu "github.com/libp2p/go-libp2p/p2p/net/upgrader"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
	"github.com/multiformats/go-multistream"

	"github.com/ringtail-ml/ringtail/internal/admit"
)

// The protocols ringtail speaks over libp2p streams.
const (
	// DataProtocol carries data-plane connections (Network).
	DataProtocol protocol.ID = "/ringtail/data/1"
	// RendezvousProtocol carries the coordinator protocol of
	// internal/rendezvous, unchanged.
	RendezvousProtocol protocol.ID = "/ringtail/rendezvous/1"
)

// HostConfig configures a libp2p host.
type HostConfig struct {
	// Key is the host's identity; nil means a fresh RandomKey.
	Key crypto.PrivKey
	// ListenIP is the IP to listen on ("" = 127.0.0.1). An unspecified IP
	// (0.0.0.0, ::) binds every interface.
	ListenIP string
	// Port is the TCP port to listen on (0 = ephemeral).
	Port int
	// DialOnly makes a host that listens nowhere, for a rank that only
	// reaches the coordinator.
	DialOnly bool
	// Gate, if set, admits every inbound connection until a stream on it
	// authenticates (see gate.go); the coordinator's host sets it.
	Gate *admit.Gate
	// MaxInboundStreams bounds the streams a peer may have open to this
	// host on one connection (0: no limit beyond libp2p's).
	MaxInboundStreams int
}

// Validate checks the configuration.
func (c *HostConfig) Validate() error {
	if c.ListenIP != "" && net.ParseIP(c.ListenIP) == nil {
		return fmt.Errorf("p2p: listen IP %q is not an IP address", c.ListenIP)
	}
	if c.Port < 0 || c.Port > 65535 {
		return fmt.Errorf("p2p: port %d outside 0..65535", c.Port)
	}
	if c.MaxInboundStreams < 0 {
		return fmt.Errorf("p2p: negative stream limit %d", c.MaxInboundStreams)
	}
	if c.Key != nil && c.Key.Type() != crypto.Ed25519 {
		return fmt.Errorf("p2p: key type %v, want Ed25519", c.Key.Type())
	}
	return nil
}

// NegotiateTimeout bounds the protocol negotiation of one inbound stream.
const NegotiateTimeout = 10 * time.Second

// Host is one libp2p node: TCP, Noise, yamux, a protocol switch and nothing
// else (no identify, ping, relay, NAT service, mDNS or DHT). It is safe for
// concurrent use.
type Host struct {
	id    peer.ID
	swarm *swarm.Swarm
	ps    peerstore.Peerstore
	addr  ma.Multiaddr // where it listens, with /p2p/<id>; nil when dial-only
	mux   *multistream.MultistreamMuxer[protocol.ID]

	mu        sync.Mutex
	protocols map[protocol.ID]bool // protocols with an open Listener
	closed    bool

	gates *gatedConns // nil unless HostConfig.Gate is set

	closeOnce sync.Once
	closeErr  error
	down      atomic.Bool // set first by Close: the host's streams write no more
}

// NewHost validates cfg and starts a host listening on cfg.ListenIP:cfg.Port.
func NewHost(cfg HostConfig) (*Host, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.ListenIP == "" {
		cfg.ListenIP = "127.0.0.1"
	}
	key := cfg.Key
	if key == nil {
		var err error
		if key, err = RandomKey(); err != nil {
			return nil, err
		}
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("p2p: peer id: %w", err)
	}
	ps, err := pstoremem.NewPeerstore()
	if err != nil {
		return nil, fmt.Errorf("p2p: peerstore: %w", err)
	}
	fail := func(what string, err error, closers ...func() error) (*Host, error) {
		for _, c := range closers {
			_ = c()
		}
		_ = ps.Close()
		return nil, fmt.Errorf("p2p: %s: %w", what, err)
	}
	if err := ps.AddPrivKey(id, key); err != nil {
		return fail("add key", err)
	}
	if err := ps.AddPubKey(id, key.GetPublic()); err != nil {
		return fail("add key", err)
	}
	// No limits, as with transport.Sockets: peers are admitted by ringtail's
	// HMAC handshake, and per-IP connection limits would refuse the ranks
	// of a many-GPU node.
	rm := &network.NullResourceManager{}
	bus := eventbus.NewBus()
	sw, err := swarm.NewSwarm(id, ps, bus, swarm.WithResourceManager(rm))
	if err != nil {
		return fail("swarm", err)
	}
	mux := yamux.DefaultTransport
	if cfg.MaxInboundStreams > 0 {
		t := *yamux.DefaultTransport
		t.MaxIncomingStreams = uint32(cfg.MaxInboundStreams)
		mux = &t
	}
	muxers := []tptu.StreamMuxer{{ID: yamux.ID, Muxer: mux}}
	nz, err := noise.New(noise.ID, key, muxers)
	if err != nil {
		return fail("noise", err, sw.Close)
	}
	up, err := tptu.New([]sec.SecureTransport{nz}, muxers, nil, rm, nil)
	if err != nil {
		return fail("upgrader", err, sw.Close)
	}
	tpt, err := tcp.NewTCPTransport(up, rm, nil)
	if err != nil {
		return fail("tcp transport", err, sw.Close)
	}
	var swt transport.Transport = tpt
	var gates *gatedConns
	if cfg.Gate != nil {
		gates = newGatedConns(cfg.Gate)
		swt = &gatedTCP{TcpTransport: tpt, up: up, gates: gates}
	}
	if err := sw.AddTransport(swt); err != nil {
		return fail("tcp transport", err, sw.Close)
	}
	h := &Host{id: id, swarm: sw, ps: ps, mux: multistream.NewMultistreamMuxer[protocol.ID](), protocols: map[protocol.ID]bool{}, gates: gates}
	sw.SetStreamHandler(h.inbound)
	if !cfg.DialOnly {
		ip := net.ParseIP(cfg.ListenIP)
		fam := "ip6"
		if ip.To4() != nil {
			fam = "ip4"
		}
		la, err := ma.NewMultiaddr(fmt.Sprintf("/%s/%s/tcp/%d", fam, ip, cfg.Port))
		if err != nil {
			return fail("listen address", err, sw.Close)
		}
		if err := sw.Listen(la); err != nil {
			return fail(fmt.Sprintf("listen on %s", la), err, sw.Close)
		}
		bound := sw.ListenAddresses()
		if len(bound) == 0 {
			return fail("listen", errors.New("no listen address bound"), sw.Close)
		}
		p2pPart, err := ma.NewMultiaddr("/p2p/" + id.String())
		if err != nil {
			return fail("listen address", err, sw.Close)
		}
		h.addr = bound[0].Encapsulate(p2pPart)
	}
	return h, nil
}

// inbound negotiates the protocol of a stream a peer opened and hands it to
// that protocol's Listener; a stream that names no open protocol, or does
// not negotiate within NegotiateTimeout, is reset.
func (h *Host) inbound(s network.Stream) {
	_ = s.SetDeadline(time.Now().Add(NegotiateTimeout))
	proto, handle, err := h.mux.Negotiate(s)
	if err != nil {
		_ = s.Reset()
		return
	}
	_ = s.SetDeadline(time.Time{})
	_ = s.SetProtocol(proto)
	_ = handle(proto, s)
}

// ID returns the host's peer ID.
func (h *Host) ID() peer.ID { return h.id }

// Addr returns where the host listens, ending in /p2p/<ID>, or nil for a
// dial-only host. A host bound to an unspecified IP reports that IP.
func (h *Host) Addr() ma.Multiaddr { return slices.Clone(h.addr) }

// Close stops listening and closes every connection and stream.
func (h *Host) Close() error {
	h.closeOnce.Do(func() {
		h.down.Store(true)
		h.mu.Lock()
		h.closed = true
		h.mu.Unlock()
		h.closeErr = h.swarm.Close()
		if err := h.ps.Close(); h.closeErr == nil {
			h.closeErr = err
		}
	})
	return h.closeErr
}

// Listen accepts streams of protocol proto until the Listener is closed.
// One Listener per protocol may be open at a time.
func (h *Host) Listen(proto protocol.ID) (*Listener, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, fmt.Errorf("p2p: host %s is closed", h.id)
	}
	if h.protocols[proto] {
		return nil, fmt.Errorf("p2p: a listener for %s is already open on %s", proto, h.ID())
	}
	h.protocols[proto] = true
	l := newListener(h, proto)
	h.mux.AddHandler(proto, func(_ protocol.ID, rwc io.ReadWriteCloser) error {
		l.handle(rwc.(network.Stream))
		return nil
	})
	return l, nil
}

func (h *Host) unlisten(proto protocol.ID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mux.RemoveHandler(proto)
	delete(h.protocols, proto)
}

// Dial opens a stream of protocol proto to the peer at addr, which must end
// in /p2p/<peer ID>; Noise refuses a peer holding any other key. It
// connects first when no connection to the peer is open, and honours ctx
// throughout, the protocol negotiation included.
func (h *Host) Dial(ctx context.Context, addr ma.Multiaddr, proto protocol.ID) (net.Conn, error) {
	info, err := peer.AddrInfoFromP2pAddr(addr)
	if err != nil {
		return nil, fmt.Errorf("p2p: address %s: %w", addr, err)
	}
	h.ps.AddAddrs(info.ID, info.Addrs, peerstore.TempAddrTTL)
	// Callers retry on their own schedule; skip the swarm's dial backoff.
	dctx := network.WithForceDirectDial(ctx, "ringtail retries on its own")
	s, err := h.swarm.NewStream(dctx, info.ID)
	if err != nil {
		return nil, fmt.Errorf("p2p: dial %s: %w", addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = s.SetDeadline(time.Now()) })
	err = multistream.SelectProtoOrFail(proto, s)
	if !stop() || ctx.Err() != nil {
		_ = s.Reset()
		return nil, fmt.Errorf("p2p: negotiate %s with %s: %w", proto, addr, ctx.Err())
	}
	if err != nil {
		_ = s.Reset()
		return nil, fmt.Errorf("p2p: negotiate %s with %s: %w", proto, addr, err)
	}
	_ = s.SetDeadline(time.Time{})
	_ = s.SetProtocol(proto)
	return newConn(s, &h.down), nil
}

// isPeerMismatch reports whether err says the peer presented a key other
// than the one its address named: an impostor, which retrying will not heal.
func isPeerMismatch(err error) bool {
	var m sec.ErrPeerIDMismatch
	return errors.As(err, &m)
}
