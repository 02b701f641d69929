package p2p

import (
	"net"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/ringtail-ml/ringtail/internal/admit"
	"github.com/ringtail-ml/ringtail/internal/transport"
)

// Listener accepts the streams peers open with one protocol on one Host,
// as net.Conns. It is a net.Listener (so rendezvous.Server.Serve can run on
// it) and a transport.Listener (so transport.Connect can).
type Listener struct {
	host  *Host
	proto protocol.ID
	ep    transport.Endpoint
	conns chan *conn
	done  chan struct{}
	once  sync.Once
	owned bool // Close also closes host, once the accepted streams are closed

	mu      sync.Mutex    // guards the fields below (owned listeners only)
	open    int           // streams Accept returned that are not closed yet
	closing bool          // Close has begun: Accept returns no more streams
	drained chan struct{} // closed when closing and open reaches 0
}

// drainGrace bounds how long closing a coordinator's listener waits for
// the streams it accepted to close before it closes the host under them.
const drainGrace = 5 * time.Second

var (
	_ net.Listener       = (*Listener)(nil)
	_ transport.Listener = (*Listener)(nil)
)

func newListener(h *Host, proto protocol.ID) *Listener {
	return &Listener{host: h, proto: proto, conns: make(chan *conn), done: make(chan struct{}), drained: make(chan struct{})}
}

// handle runs on the stream's own goroutine; it waits until Accept takes
// the stream or the listener closes (then the stream is reset).
func (l *Listener) handle(s network.Stream) {
	select {
	case l.conns <- l.newConn(s):
	case <-l.done:
		_ = s.Reset()
	}
}

// newConn presents s as a net.Conn; on a gated host, the conn's
// Authenticated takes s's connection out of the gate.
func (l *Listener) newConn(s network.Stream) *conn {
	c := newConn(s, &l.host.down)
	if g := l.host.gates; g != nil {
		remote := s.Conn().RemoteMultiaddr()
		c.onAuth = func() { g.authenticated(remote) }
	}
	return c
}

// Accept waits for the next stream; after Close it returns net.ErrClosed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		if !l.owned {
			return c, nil
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.closing {
			_ = c.Reset()
			return nil, net.ErrClosed
		}
		l.open++
		c.onClose = l.closed
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// closed counts one accepted stream of an owned listener closed.
func (l *Listener) closed() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open--; l.open == 0 && l.closing {
		close(l.drained)
	}
}

// Close stops accepting (streams already accepted stay open). For the
// listener of ListenCoordinator it also closes the coordinator's host, once
// the streams it accepted are closed (drainGrace at most): a rendezvous
// stopping right after it decided its group still delivers every rank's
// answer. Concurrent calls return when the first has.
func (l *Listener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.done)
		l.host.unlisten(l.proto)
		if !l.owned {
			return
		}
		l.mu.Lock()
		l.closing = true
		open := l.open
		l.mu.Unlock()
		if open > 0 {
			t := time.NewTimer(drainGrace)
			select {
			case <-l.drained:
			case <-t.C:
			}
			t.Stop()
		}
		err = l.host.Close()
	})
	return err
}

// Addr returns the host's address (ending in /p2p/<ID>) and peer ID.
func (l *Listener) Addr() net.Addr {
	a := Addr{Peer: l.host.ID()}
	if addr := l.host.Addr(); addr != nil {
		a.Multiaddr, _ = peer.SplitAddr(addr)
	}
	return a
}

// Endpoint returns the endpoint to advertise through the rendezvous; it is
// set for listeners made by Network.Listen.
func (l *Listener) Endpoint() transport.Endpoint { return l.ep }

// GateStats returns the counters of the gate admitting this listener's
// host's connections (the coordinator's); ok is false on an ungated host.
func (l *Listener) GateStats() (s admit.Stats, ok bool) {
	if l.host.gates == nil {
		return admit.Stats{}, false
	}
	return l.host.gates.gate.Stats(), true
}
