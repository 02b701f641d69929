package p2p

import (
	"fmt"
	"sync"

	"github.com/libp2p/go-libp2p/core/transport"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/ringtail-ml/ringtail/internal/admit"
)

// A gated host (the coordinator's) admits every inbound TCP connection
// through an admit.Gate before libp2p sees a byte of it: Noise, yamux and
// the stream negotiation all happen inside the connection's handshake
// deadline, at most MaxPending such connections are held (the oldest
// make room), and only when the rendezvous on one of its streams proves
// the job secret (conn.Authenticated) does the connection leave the gate.
// Without this an idle or half-open TCP connection would hold libp2p's
// upgrade goroutines for 15 s each, and a stranger completing Noise with
// a key of its own would hold a yamux session for as long as it liked.

// gatedTCP is libp2p's TCP transport with a gated listener.
type gatedTCP struct {
	*tcp.TcpTransport
	up    transport.Upgrader
	gates *gatedConns
}

// Listen listens on laddr, admitting each accepted connection through the
// gate, and upgrades the connections as libp2p's TCP transport would.
func (t *gatedTCP) Listen(laddr ma.Multiaddr) (transport.Listener, error) {
	ml, err := manet.Listen(laddr)
	if err != nil {
		return nil, fmt.Errorf("p2p: listen on %s: %w", laddr, err)
	}
	return t.up.UpgradeGatedMaListener(t, t.up.GateMaListener(&gatedListener{Listener: ml, gates: t.gates})), nil
}

// gatedConns tracks the admitted connections that have not authenticated,
// by remote multiaddr (what the streams on them report).
type gatedConns struct {
	gate *admit.Gate
	mu   sync.Mutex
	pass map[string]*admit.Pass // guarded by mu
}

func newGatedConns(g *admit.Gate) *gatedConns {
	return &gatedConns{gate: g, pass: map[string]*admit.Pass{}}
}

// authenticated takes the connection from remote out of the gate.
func (g *gatedConns) authenticated(remote ma.Multiaddr) {
	if remote == nil {
		return
	}
	g.mu.Lock()
	p := g.pass[string(remote.Bytes())]
	delete(g.pass, string(remote.Bytes()))
	g.mu.Unlock()
	if p != nil {
		p.Authenticated()
	}
}

// closedBeforeAuth is the reason logged for a connection closed while it
// was still pending: libp2p refused it (no multistream, no Noise, a
// protocol other than the rendezvous) or the stranger hung up.
const closedBeforeAuth = "closed before authenticating (libp2p's handshake failed, or the peer hung up)"

// closed takes a connection that libp2p has closed out of the gate. One
// that never authenticated counts and is logged (rate-limited) as a
// refusal, as the tcp control plane logs a bad handshake; the gate's own
// evictions and expiries were logged when they happened.
func (g *gatedConns) closed(key string, p *admit.Pass) {
	g.mu.Lock()
	if g.pass[key] == p {
		delete(g.pass, key)
	}
	g.mu.Unlock()
	p.Refuse(closedBeforeAuth, nil)
}

// gatedListener admits every accepted connection through the gate.
type gatedListener struct {
	manet.Listener
	gates *gatedConns
}

// Accept implements manet.Listener.
func (l *gatedListener) Accept() (manet.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	key := string(c.RemoteMultiaddr().Bytes())
	p := l.gates.gate.Admit(c)
	l.gates.mu.Lock()
	l.gates.pass[key] = p
	l.gates.mu.Unlock()
	return &gatedConn{Conn: c, closed: func() { l.gates.closed(key, p) }}, nil
}

// gatedConn frees its place in the gate when libp2p closes it (logging a
// refusal first if it never authenticated, so that whoever sees the
// connection end also finds the refusal in the log).
type gatedConn struct {
	manet.Conn
	once   sync.Once
	closed func()
}

// Close implements net.Conn.
func (c *gatedConn) Close() error {
	c.once.Do(c.closed)
	return c.Conn.Close()
}
