package p2p

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// Addr is one end of a libp2p stream: the transport address and the peer
// ID that Noise authenticated there.
type Addr struct {
	Multiaddr ma.Multiaddr // transport address, e.g. /ip4/10.0.0.7/tcp/40123
	Peer      peer.ID      // the key's peer ID
}

// Network returns "libp2p".
func (a Addr) Network() string { return "libp2p" }

// String returns the multiaddr ending in /p2p/<peer ID>.
func (a Addr) String() string { return a.Multiaddr.String() + "/p2p/" + a.Peer.String() }

// conn presents a libp2p stream as a net.Conn. Deadline expiries are
// net.Errors with Timeout() true; Close closes both directions gracefully;
// CloseWrite half-closes, so queued bytes (an Abort) reach the peer before
// it reads end of stream.
type conn struct {
	network.Stream
	local, remote Addr
	down          *atomic.Bool // the host is closing: write nothing more
	onAuth        func()       // set on a gated host's inbound streams
	onClose       func()       // set by an owned Listener's Accept; run by the first Close
	closeOnce     sync.Once
}

var _ net.Conn = (*conn)(nil)

func newConn(s network.Stream, down *atomic.Bool) *conn {
	c := s.Conn()
	return &conn{
		Stream: s,
		down:   down,
		local:  Addr{Multiaddr: c.LocalMultiaddr(), Peer: c.LocalPeer()},
		remote: Addr{Multiaddr: c.RemoteMultiaddr(), Peer: c.RemotePeer()},
	}
}

// Write fails once the host is closing: its streams then close one by one,
// and a rank whose host is gone must not tell the others anything about
// the streams that went first (as a dead process could not).
func (c *conn) Write(p []byte) (int, error) {
	if c.down.Load() {
		return 0, net.ErrClosed
	}
	return c.Stream.Write(p)
}

// LocalAddr returns this end's address and peer ID.
func (c *conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr returns the peer's address and its authenticated peer ID.
func (c *conn) RemoteAddr() net.Addr { return c.remote }

// SetDeadline sets the read and write deadlines.
func (c *conn) SetDeadline(t time.Time) error { return c.Stream.SetDeadline(t) }

// SetReadDeadline sets the read deadline.
func (c *conn) SetReadDeadline(t time.Time) error { return c.Stream.SetReadDeadline(t) }

// SetWriteDeadline sets the write deadline.
func (c *conn) SetWriteDeadline(t time.Time) error { return c.Stream.SetWriteDeadline(t) }

// Close closes both directions of the stream gracefully.
func (c *conn) Close() error {
	err := c.Stream.Close()
	c.closeOnce.Do(func() {
		if c.onClose != nil {
			c.onClose()
		}
	})
	return err
}

// CloseWrite half-closes the stream.
func (c *conn) CloseWrite() error { return c.Stream.CloseWrite() }

// Authenticated tells a gated host (the coordinator's) that the peer on
// this stream proved the job secret, so its connection leaves the gate
// (its handshake deadline no longer applies and a flood cannot evict it).
// internal/rendezvous's Server calls it; it does nothing on other streams.
func (c *conn) Authenticated() {
	if c.onAuth != nil {
		c.onAuth()
	}
}
