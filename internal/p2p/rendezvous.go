package p2p

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"

	ma "github.com/multiformats/go-multiaddr"

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
}

// Validate checks the configuration.
func (c *CoordinatorConfig) Validate() error {
	switch {
	case c.JobID == "":
		return errors.New("p2p: coordinator needs a job id")
	case len(c.Secret) == 0:
		return errors.New("p2p: coordinator needs a job secret")
	case c.Port < 0 || c.Port > 65535:
		return fmt.Errorf("p2p: coordinator port %d outside 0..65535", c.Port)
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
	h, err := NewHost(HostConfig{Key: key, ListenIP: cfg.ListenIP, Port: cfg.Port})
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
	return c, err
}

// Register registers with the coordinator at req.Addr (a multiaddr, as
// CoordinatorAddr makes) over libp2p, with the unchanged client of
// internal/rendezvous: it relays that client's TCP connections, on a
// loopback port that lives only as long as the call, to RendezvousProtocol
// streams from h. It retries while the coordinator is not yet listening and
// fails at once, wrapping rendezvous.ErrRefused, when the peer there is not
// the coordinator.
//
// The relay exists only because rendezvous.Request has no dial hook yet;
// with one, Register becomes rendezvous.Register with Dial set to
// h.DialRendezvous.
func Register(ctx context.Context, h *Host, req rendezvous.Request) ([]rendezvous.Member, error) {
	target := req.Addr
	if _, err := ma.NewMultiaddr(target); err != nil {
		return nil, fmt.Errorf("p2p: coordinator address %q: %w", target, err)
	}
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var lc net.ListenConfig
	ln, err := lc.Listen(rctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("p2p: rendezvous relay: %w", err)
	}
	r := &relay{host: h, target: target, ln: ln, conns: map[net.Conn]bool{}, refuse: cancel}
	r.wg.Add(1)
	go r.serve(rctx)
	defer r.close()
	req.Addr = ln.Addr().String()
	members, err := rendezvous.Register(rctx, req)
	if err == nil {
		return members, nil
	}
	if cause := context.Cause(rctx); errors.Is(cause, rendezvous.ErrRefused) {
		return nil, fmt.Errorf("p2p: rendezvous with %s: %w", target, cause)
	}
	if last := r.lastErr(); last != nil {
		return nil, fmt.Errorf("p2p: rendezvous with %s: %w (last libp2p error: %v)", target, err, last)
	}
	return nil, fmt.Errorf("p2p: rendezvous with %s: %w", target, err)
}

// relay splices loopback TCP connections to rendezvous streams.
type relay struct {
	host   *Host
	target string
	ln     net.Listener
	refuse context.CancelCauseFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]bool
	last  error
}

func (r *relay) serve(ctx context.Context) {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		if !r.track(c) {
			c.Close()
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer r.untrack(c)
			s, err := r.host.DialRendezvous(ctx, r.target)
			if err != nil {
				r.mu.Lock()
				r.last = err
				r.mu.Unlock()
				if errors.Is(err, rendezvous.ErrRefused) {
					r.refuse(err)
				}
				c.Close()
				return
			}
			if !r.track(s) {
				s.Close()
				c.Close()
				return
			}
			defer r.untrack(s)
			splice(c, s)
		}()
	}
}

// track registers c to be closed by close; false once closing.
func (r *relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conns == nil {
		return false
	}
	r.conns[c] = true
	return true
}

func (r *relay) untrack(c net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.conns, c)
}

func (r *relay) lastErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

func (r *relay) close() {
	r.ln.Close()
	r.mu.Lock()
	for c := range r.conns {
		c.Close()
	}
	r.conns = nil
	r.mu.Unlock()
	r.wg.Wait()
}

// splice copies both ways until both directions end, passing each end of
// stream on as a half-close, then closes both.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if hc, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = hc.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	go cp(a, b)
	go cp(b, a)
	wg.Wait()
	a.Close()
	b.Close()
}
