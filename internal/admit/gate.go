package admit

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/logging"
)

// Defaults for Config's zero values.
const (
	DefaultMaxPending          = 256
	DefaultMaxPendingPerSource = 32
	DefaultDeadline            = 10 * time.Second
)

// Config configures a Gate.
type Config struct {
	// Name labels the gate's log events (e.g. "rendezvous").
	Name string
	// MaxPending bounds the unauthenticated connections held at once
	// (0: DefaultMaxPending).
	MaxPending int
	// MaxPendingPerSource bounds those from one source IP
	// (0: DefaultMaxPendingPerSource). The ranks of one host share an IP,
	// but each is pending only for its handshake's round trips.
	MaxPendingPerSource int
	// Deadline is how long a connection may stay unauthenticated before
	// the gate closes it (0: DefaultDeadline).
	Deadline time.Duration
	// Logger receives the refusals (at warn, at most a few per 10 s, with
	// a count of those not written).
	Logger zerolog.Logger
}

// Validate reports unusable values.
func (c *Config) Validate() error {
	if c.MaxPending < 0 || c.MaxPendingPerSource < 0 || c.Deadline < 0 {
		return fmt.Errorf("admit: negative limit or deadline in %+v", *c)
	}
	return nil
}

// Gate admits unauthenticated connections within fixed limits. It is safe
// for concurrent use.
type Gate struct {
	cfg     Config
	refusal *logging.Limited

	mu      sync.Mutex
	pending *pendingSet // guarded by mu
	evicted uint64      // guarded by mu
	expired uint64      // guarded by mu
}

// New validates cfg and returns a Gate.
func New(cfg Config) (*Gate, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxPending == 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.MaxPendingPerSource == 0 {
		cfg.MaxPendingPerSource = DefaultMaxPendingPerSource
	}
	if cfg.Deadline == 0 {
		cfg.Deadline = DefaultDeadline
	}
	log := cfg.Logger.With().Str("component", cfg.Name).Logger()
	return &Gate{
		cfg:     cfg,
		refusal: logging.NewLimited(log, logging.LimitedOptions{Level: zerolog.WarnLevel}),
		pending: newPendingSet(cfg.MaxPending, cfg.MaxPendingPerSource),
	}, nil
}

// Deadline returns the configured handshake deadline.
func (g *Gate) Deadline() time.Duration { return g.cfg.Deadline }

// Pass is one admitted connection's place in the gate.
type Pass struct {
	g     *Gate
	c     net.Conn
	e     *entry
	timer *time.Timer
}

// Admit records c as pending and arms its deadline. To make room it may
// close another pending connection: the oldest from c's source when that
// source is at its limit, else the oldest of all when the gate is full.
// The caller must call Authenticated when c proves the secret and Release
// when it is done with c.
func (g *Gate) Admit(c net.Conn) *Pass {
	p := &Pass{g: g, c: c}
	src := Source(c.RemoteAddr())
	g.mu.Lock()
	e, ev, why := g.pending.add(src, p)
	p.e = e
	p.timer = time.AfterFunc(g.cfg.Deadline, p.expire) // expire takes mu: it sees p.e set
	if ev != nil {
		g.evicted++
	}
	g.mu.Unlock()
	if ev != nil {
		old := ev.value.(*Pass)
		old.timer.Stop()
		_ = old.c.Close()
		g.refuse(old.c, string(why), nil)
	}
	return p
}

// expire closes a connection still pending at its deadline.
func (p *Pass) expire() {
	g := p.g
	g.mu.Lock()
	ok := g.pending.remove(p.e)
	if ok {
		g.expired++
	}
	g.mu.Unlock()
	if ok {
		// Logged before the close, so whoever sees the connection end
		// also finds the refusal in the log.
		g.refuse(p.c, fmt.Sprintf("not authenticated within %v", g.cfg.Deadline), nil)
		_ = p.c.Close()
	}
}

// Authenticated takes c out of the pending set and disarms its deadline.
// It returns false when the gate has already closed c (evicted, or the
// deadline passed first): the caller must then drop it.
func (p *Pass) Authenticated() bool {
	p.g.mu.Lock()
	ok := p.g.pending.remove(p.e)
	p.g.mu.Unlock()
	if ok {
		p.timer.Stop()
	}
	return ok
}

// Release frees c's place if it is still pending (it failed or hung up
// before authenticating). It does not close c. It is idempotent, and a
// no-op after Authenticated.
func (p *Pass) Release() {
	p.g.mu.Lock()
	ok := p.g.pending.remove(p.e)
	p.g.mu.Unlock()
	if ok {
		p.timer.Stop()
	}
}

// Refuse records that the server refused the connection before it
// authenticated (a malformed handshake, a wrong secret): it frees the
// place and logs the refusal, rate-limited, with reason and err. A
// connection the gate itself closed (evicted, expired) was logged then
// and is not logged again. The server still closes the connection.
func (p *Pass) Refuse(reason string, err error) {
	p.g.mu.Lock()
	ok := p.g.pending.remove(p.e)
	p.g.mu.Unlock()
	if ok {
		p.timer.Stop()
		p.g.refuse(p.c, reason, err)
	}
}

func (g *Gate) refuse(c net.Conn, reason string, err error) {
	e := g.refusal.Event()
	if c != nil {
		e = e.Str("remote", c.RemoteAddr().String())
	}
	if err != nil {
		e = e.Err(err)
	}
	e.Str("reason", reason).Msg("refused an unauthenticated connection")
}

// Flush logs the count of refusals the rate limit held back, if any.
func (g *Gate) Flush() {
	g.refusal.Flush("refused unauthenticated connections (not logged one by one)")
}

// Stats is a snapshot of a Gate's counters.
type Stats struct {
	Pending int    // connections pending now
	Sources int    // distinct sources among them
	Evicted uint64 // closed to make room
	Expired uint64 // closed at their deadline
	Refused uint64 // every refusal (evictions, expiries, Pass.Refuse), logged or counted
}

// Stats returns the gate's counters.
func (g *Gate) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return Stats{Pending: g.pending.len(), Sources: g.pending.sources(), Evicted: g.evicted, Expired: g.expired, Refused: g.refusal.Total()}
}

// Source returns the source a connection is counted under: its remote IP
// (the host part of the address, for addresses that are not *net.TCPAddr
// but print as host:port), or the whole address string.
func Source(a net.Addr) string {
	if a == nil {
		return ""
	}
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.IP.String()
	case interface{ IP() net.IP }:
		if ip := a.IP(); ip != nil {
			return ip.String()
		}
	}
	if host, _, err := net.SplitHostPort(a.String()); err == nil {
		return host
	}
	return a.String()
}

// ErrClosed is what a server reports for a connection the gate closed
// (evicted, or past its deadline) before it could authenticate.
var ErrClosed = errors.New("admit: the gate closed the connection before it authenticated")
