package transport

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
)

// Endpoint is where a rank can be reached. Host identifies the host and
// network namespace: ranks with equal Host reach each other over Unix.
type Endpoint struct {
	Host string `json:"host"`
	TCP  string `json:"tcp,omitempty"`
	Unix string `json:"unix,omitempty"`
}

// Listener accepts data-plane connections at an Endpoint.
type Listener interface {
	Accept() (net.Conn, error)
	Close() error
	Endpoint() Endpoint
}

// Network opens listeners and dials endpoints. Sockets is the real one,
// Inmem its in-memory twin; both pass the same conformance tests.
type Network interface {
	Listen(ctx context.Context) (Listener, error)
	Dial(ctx context.Context, to Endpoint) (net.Conn, error)
}

// SocketsConfig configures the socket network.
type SocketsConfig struct {
	// HostID identifies this host and network namespace; empty means LocalHostID().
	HostID string
	// ListenIP is the IP the TCP listener binds and advertises ("" = 127.0.0.1).
	ListenIP string
	// DisableUnix forces TCP even between ranks on one host.
	DisableUnix bool
	// SocketBuffer is SO_SNDBUF/SO_RCVBUF for every connection (0 = 4 MiB).
	SocketBuffer int
}

// Sockets is the real network: TCP between hosts, abstract Unix sockets
// (no file, no collision: a random name per listener) within one host.
type Sockets struct{ cfg SocketsConfig }

// NewSockets validates cfg and returns the socket network.
func NewSockets(cfg SocketsConfig) (*Sockets, error) {
	if cfg.HostID == "" {
		cfg.HostID = LocalHostID()
	}
	if cfg.ListenIP == "" {
		cfg.ListenIP = "127.0.0.1"
	}
	if net.ParseIP(cfg.ListenIP) == nil {
		return nil, fmt.Errorf("transport: listen IP %q is not an IP address", cfg.ListenIP)
	}
	if cfg.SocketBuffer < 0 {
		return nil, fmt.Errorf("transport: negative socket buffer %d", cfg.SocketBuffer)
	}
	if cfg.SocketBuffer == 0 {
		cfg.SocketBuffer = 4 << 20
	}
	return &Sockets{cfg: cfg}, nil
}

// LocalHostID names this host and network namespace: the hostname, the boot
// id and the inode of the network namespace, so two containers or two
// network namespaces on one machine never take each other for the same host.
func LocalHostID() string {
	h, _ := os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	ns, _ := os.Readlink("/proc/self/ns/net")
	return h + "/" + strings.TrimSpace(string(boot)) + "/" + ns
}

type socketListener struct {
	tcp, unix net.Listener
	ep        Endpoint
	conns     chan net.Conn
	done      chan struct{}
	once      sync.Once
	wg        sync.WaitGroup
}

// Listen opens a TCP listener on an ephemeral port and, unless disabled, an
// abstract Unix listener with a random name.
func (s *Sockets) Listen(ctx context.Context) (Listener, error) {
	var lc net.ListenConfig
	tl, err := lc.Listen(ctx, "tcp", net.JoinHostPort(s.cfg.ListenIP, "0"))
	if err != nil {
		return nil, fmt.Errorf("transport: listen tcp: %w", err)
	}
	l := &socketListener{tcp: tl, conns: make(chan net.Conn), done: make(chan struct{})}
	l.ep = Endpoint{Host: s.cfg.HostID, TCP: tl.Addr().String()}
	if !s.cfg.DisableUnix {
		var rnd [12]byte
		if _, err := rand.Read(rnd[:]); err != nil {
			tl.Close()
			return nil, fmt.Errorf("transport: random socket name: %w", err)
		}
		name := "@ringtail-" + hex.EncodeToString(rnd[:])
		ul, err := lc.Listen(ctx, "unix", name)
		if err != nil {
			tl.Close()
			return nil, fmt.Errorf("transport: listen unix %s: %w", name, err)
		}
		l.unix = ul
		l.ep.Unix = name
	}
	for _, inner := range []net.Listener{l.tcp, l.unix} {
		if inner == nil {
			continue
		}
		l.wg.Add(1)
		go l.acceptLoop(inner, s.cfg.SocketBuffer)
	}
	return l, nil
}

func (l *socketListener) acceptLoop(inner net.Listener, buf int) {
	defer l.wg.Done()
	for {
		c, err := inner.Accept()
		if err != nil {
			return
		}
		tune(c, buf)
		select {
		case l.conns <- c:
		case <-l.done:
			c.Close()
			return
		}
	}
}

func (l *socketListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *socketListener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.tcp.Close()
		if l.unix != nil {
			l.unix.Close()
		}
	})
	l.wg.Wait()
	return nil
}

func (l *socketListener) Endpoint() Endpoint { return l.ep }

// Dial connects to an endpoint: over Unix when it is on this host, else TCP.
func (s *Sockets) Dial(ctx context.Context, to Endpoint) (net.Conn, error) {
	var d net.Dialer
	network, addr := "tcp", to.TCP
	if !s.cfg.DisableUnix && to.Unix != "" && to.Host == s.cfg.HostID {
		network, addr = "unix", to.Unix
	}
	if addr == "" {
		return nil, fmt.Errorf("transport: endpoint %+v has no reachable address", to)
	}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tune(c, s.cfg.SocketBuffer)
	return c, nil
}

func tune(c net.Conn, buf int) {
	switch c := c.(type) {
	case *net.TCPConn:
		_ = c.SetNoDelay(true)
		_ = c.SetReadBuffer(buf)
		_ = c.SetWriteBuffer(buf)
	case *net.UnixConn:
		_ = c.SetReadBuffer(buf)
		_ = c.SetWriteBuffer(buf)
	}
}

// closeWrite half-closes a connection where the type allows it, so queued
// frames (an Abort) are delivered before the peer sees end of stream.
func closeWrite(c net.Conn) {
	type halfCloser interface{ CloseWrite() error }
	if hc, ok := c.(halfCloser); ok {
		_ = hc.CloseWrite()
		return
	}
	_ = c.Close()
}

// isTimeout reports whether err is a deadline expiry.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isReset reports whether err is a connection reset, refusal or EOF-like end.
func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNREFUSED)
}
