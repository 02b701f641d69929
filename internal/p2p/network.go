package p2p

import (
	"context"
	"fmt"
	"net"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/ringtail-ml/ringtail/internal/transport"
)

// NetworkConfig configures the libp2p data-plane network of one rank.
type NetworkConfig struct {
	// HostID fills Endpoint.Host ("" = transport.LocalHostID()). It is only
	// informative here: every connection goes through libp2p over TCP.
	HostID string
	// ListenIP is the IP the host listens on and advertises ("" =
	// 127.0.0.1). It must be a specific IP, since peers dial what it
	// advertises.
	ListenIP string
	// Key is the rank's identity (nil = a fresh RandomKey).
	Key crypto.PrivKey
}

// Validate checks the configuration.
func (c *NetworkConfig) Validate() error {
	if c.ListenIP != "" {
		ip := net.ParseIP(c.ListenIP)
		if ip == nil {
			return fmt.Errorf("p2p: listen IP %q is not an IP address", c.ListenIP)
		}
		if ip.IsUnspecified() {
			return fmt.Errorf("p2p: listen IP %s is unspecified; the network advertises it, so name one interface", c.ListenIP)
		}
	}
	return nil
}

// Network is the libp2p data plane, the twin of transport.Sockets for
// untrusted networks: every connection is a yamux stream of protocol
// DataProtocol inside a Noise session over TCP. It owns one Host, which the
// rank may also use to reach the coordinator (Host, DialRendezvous).
//
// An Endpoint of this network carries the listen multiaddr, ending in
// /p2p/<peer ID>, in its TCP field, e.g.
//
//	{"host":"node7/…","tcp":"/ip4/10.0.0.7/tcp/40123/p2p/12D3KooW…"}
//
// and no Unix field; it round-trips through the rendezvous JSON unchanged.
// Only one Listener may be open at a time (a rank has one per mesh).
type Network struct {
	host   *Host
	hostID string
}

var _ transport.Network = (*Network)(nil)

// NewNetwork validates cfg and starts the rank's host, listening on
// cfg.ListenIP at an ephemeral port.
func NewNetwork(cfg NetworkConfig) (*Network, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.HostID == "" {
		cfg.HostID = transport.LocalHostID()
	}
	h, err := NewHost(HostConfig{Key: cfg.Key, ListenIP: cfg.ListenIP})
	if err != nil {
		return nil, err
	}
	return &Network{host: h, hostID: cfg.HostID}, nil
}

// Host returns the network's host.
func (n *Network) Host() *Host { return n.host }

// Listen starts accepting data-plane streams. Closing the Listener stops
// that; the host keeps running until Close.
func (n *Network) Listen(ctx context.Context) (transport.Listener, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("p2p: listen: %w", err)
	}
	l, err := n.host.Listen(DataProtocol)
	if err != nil {
		return nil, err
	}
	l.ep = transport.Endpoint{Host: n.hostID, TCP: n.host.Addr().String()}
	return l, nil
}

// Dial opens a data-plane stream to the rank at to. The peer must hold the
// key named in the endpoint; ringtail's handshake then runs on the stream.
func (n *Network) Dial(ctx context.Context, to transport.Endpoint) (net.Conn, error) {
	addr, err := endpointAddr(to)
	if err != nil {
		return nil, err
	}
	return n.host.Dial(ctx, addr, DataProtocol)
}

// Close closes the host and with it every stream of this network.
func (n *Network) Close() error { return n.host.Close() }

func endpointAddr(ep transport.Endpoint) (ma.Multiaddr, error) {
	if ep.TCP == "" {
		return nil, fmt.Errorf("p2p: endpoint %+v has no libp2p address", ep)
	}
	addr, err := ma.NewMultiaddr(ep.TCP)
	if err != nil {
		return nil, fmt.Errorf("p2p: endpoint %+v is not a libp2p endpoint: %w", ep, err)
	}
	if _, id := peer.SplitAddr(addr); id == "" {
		return nil, fmt.Errorf("p2p: endpoint address %s names no peer (/p2p/<id>)", addr)
	}
	return addr, nil
}
