package transport

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
)

// Inmem is the in-memory twin of Sockets: listeners live in a registry and
// connections are net.Pipe pairs. Partition makes dials to an endpoint fail,
// and Sever cuts every connection to it, as a dead host would.
type Inmem struct {
	mu        sync.Mutex
	next      int
	listeners map[string]*inmemListener
	cut       map[string]bool
}

var _ Network = (*Inmem)(nil)
var _ Network = (*Sockets)(nil)

// NewInmem returns an empty in-memory network.
func NewInmem() *Inmem {
	return &Inmem{listeners: map[string]*inmemListener{}, cut: map[string]bool{}}
}

type inmemListener struct {
	net   *Inmem
	ep    Endpoint
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	mu    sync.Mutex
	live  []net.Conn
	cut   atomic.Bool // severed: this side can no longer write
}

// severable is the listener's end of an in-memory connection: once its
// listener is severed it writes nothing more, so a "dead" rank cannot
// speak while its connections are being closed one by one.
type severable struct {
	net.Conn
	cut *atomic.Bool
}

func (c *severable) Write(p []byte) (int, error) {
	if c.cut.Load() {
		return 0, net.ErrClosed
	}
	return c.Conn.Write(p)
}

// Listen registers a new in-memory listener.
func (m *Inmem) Listen(ctx context.Context) (Listener, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next++
	name := fmt.Sprintf("inmem-%d", m.next)
	l := &inmemListener{net: m, ep: Endpoint{Host: "inmem", Unix: name}, conns: make(chan net.Conn), done: make(chan struct{})}
	m.listeners[name] = l
	return l, nil
}

// Dial connects to a registered listener.
func (m *Inmem) Dial(ctx context.Context, to Endpoint) (net.Conn, error) {
	m.mu.Lock()
	l, ok := m.listeners[to.Unix]
	cut := m.cut[to.Unix]
	m.mu.Unlock()
	if !ok || cut {
		return nil, fmt.Errorf("inmem: dial %s: connection refused", to.Unix)
	}
	a, pb := net.Pipe()
	b := &severable{Conn: pb, cut: &l.cut}
	l.track(b)
	select {
	case l.conns <- b:
		return a, nil
	case <-l.done:
		return nil, fmt.Errorf("inmem: dial %s: listener closed", to.Unix)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Sever closes the listener's own ends of every connection it accepted and
// refuses new dials to it: the in-memory form of kill -9 for a rank that
// accepts all its links (the highest rank of a mesh). Its peers read end of
// stream; what the severed side tries to send goes nowhere.
func (m *Inmem) Sever(ep Endpoint) {
	m.mu.Lock()
	m.cut[ep.Unix] = true
	l := m.listeners[ep.Unix]
	m.mu.Unlock()
	if l == nil {
		return
	}
	l.cut.Store(true)
	l.mu.Lock()
	for _, c := range l.live {
		c.Close()
	}
	l.mu.Unlock()
}

func (l *inmemListener) track(cs ...net.Conn) {
	l.mu.Lock()
	l.live = append(l.live, cs...)
	l.mu.Unlock()
}

func (l *inmemListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *inmemListener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.net.mu.Lock()
		delete(l.net.listeners, l.ep.Unix)
		l.net.mu.Unlock()
	})
	return nil
}

func (l *inmemListener) Endpoint() Endpoint { return l.ep }
