package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/admit"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// MeshConfig describes the full mesh of one communicator.
type MeshConfig struct {
	Identity  Identity
	Channels  int        // links per peer pair (parallel rings)
	Network   Network    // how to dial
	Listener  Listener   // this rank's listener, already advertised
	Endpoints []Endpoint // every rank's endpoint, by rank
	Link      LinkConfig // liveness and chunking
	Logger    zerolog.Logger
	// AbortGrace bounds how long an abort waits to reach each peer (0 = 1s).
	AbortGrace time.Duration
	// SharedMemory moves frames between ranks of one host through
	// shared-memory rings (the unix socket then only rings doorbells).
	SharedMemory bool
	// FastSpin is how long a fastbox wait polls before it starts yielding
	// the CPU (0: yield at once — right when ranks outnumber CPUs).
	FastSpin time.Duration
	// State answers a peer's Query while this rank is between calls: what
	// it has done in the asker's group (wire.State with Active false, the
	// count of calls of the group completed and the last one's Desc). It
	// returns false while a call is running; the executor answers then
	// (AnswerAsks). Nil: every Query is left to the executor.
	State func(group uint32) (wire.State, bool)
	// TolerateDeaths keeps the mesh alive when a peer dies or goes silent:
	// the peer is marked dead, its links are closed, and only a collective
	// that involves it fails (and then fails the mesh, whose links may no
	// longer agree). Eager contributions from the living keep flowing, so a
	// coded allreduce can finish a step without the dead.
	TolerateDeaths bool
}

// Validate checks the configuration.
func (c *MeshConfig) Validate() error {
	if err := c.Identity.Validate(); err != nil {
		return err
	}
	if c.Channels < 1 || c.Channels > 64 {
		return fmt.Errorf("transport: channels %d outside 1..64", c.Channels)
	}
	if c.Network == nil || c.Listener == nil {
		return fmt.Errorf("transport: mesh needs a network and a listener")
	}
	if len(c.Endpoints) != c.Identity.World {
		return fmt.Errorf("transport: %d endpoints for a world of %d", len(c.Endpoints), c.Identity.World)
	}
	return c.Link.Validate()
}

// DefaultFastSpin is the fastbox polling time before yielding when the
// caller does not choose (a negative MeshConfig.FastSpin).
const DefaultFastSpin = 5 * time.Microsecond

// Mesh is every link of one rank to every other rank of a communicator.
// It fails as a whole: the first failure is kept, every link sends an Abort
// naming the culprit, and Failed is closed.
type Mesh struct {
	id    Identity
	cfg   MeshConfig
	log   zerolog.Logger
	links [][]*Link // [peer][channel]; nil row for self

	failOnce sync.Once
	failing  atomic.Bool // set first thing when the mesh fails: writers stop
	halting  atomic.Bool // Halt has begun: readers re-arm no read deadline
	haltOnce sync.Once
	failed   chan struct{} // closed once the aborts have gone out
	err      *Error
	closing  chan struct{}
	closeMu  sync.Once

	wg       sync.WaitGroup // link goroutines
	acceptWG sync.WaitGroup

	refusedMu sync.Mutex
	refused   []string // why connections were refused while forming (the first maxRefused)
	nRefused  int      // how many were refused in all

	gate *admit.Gate // connections that have not authenticated

	asksMu sync.Mutex
	asks   []ask         // queries the executor must answer (a call was running)
	asked  atomic.Bool   // asks is not empty
	bell   chan struct{} // wakes the executor: an ask, an answer, a held frame

	anyDead    atomic.Bool // some peer is dead: DeadErr must look
	deadMu     sync.Mutex
	dead       []*Error      // by rank: why the peer is dead, or nil
	deathNotes chan struct{} // closed (and replaced) at each death

	inbox  chan Eager // eager messages from every peer, in arrival order
	poolMu sync.Mutex
	pool   map[int][][]byte // released contribution buffers by size
}

// poolDepth bounds how many released buffers of one size are kept.
const poolDepth = 8

func (m *Mesh) takeBuffer(n int) []byte {
	m.poolMu.Lock()
	defer m.poolMu.Unlock()
	if free := m.pool[n]; len(free) > 0 {
		b := free[len(free)-1]
		m.pool[n] = free[:len(free)-1]
		return b
	}
	return make([]byte, n)
}

// Release returns an eager message's buffer for reuse.
func (m *Mesh) Release(c Eager) {
	m.poolMu.Lock()
	defer m.poolMu.Unlock()
	if len(m.pool[len(c.Data)]) < poolDepth {
		m.pool[len(c.Data)] = append(m.pool[len(c.Data)], c.Data)
	}
}

// Inbox delivers eager messages from every peer.
func (m *Mesh) Inbox() <-chan Eager { return m.inbox }

// Connect forms the mesh: rank i dials every rank j > i on every channel and
// accepts from every rank below it. It returns once all links are
// authenticated, or with an error naming the ranks that never connected.
func Connect(ctx context.Context, cfg MeshConfig) (*Mesh, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.AbortGrace <= 0 {
		cfg.AbortGrace = time.Second
	}
	if cfg.FastSpin < 0 {
		cfg.FastSpin = DefaultFastSpin
	}
	m := &Mesh{id: cfg.Identity, cfg: cfg, log: cfg.Logger, failed: make(chan struct{}), closing: make(chan struct{}),
		inbox: make(chan Eager, 4*cfg.Identity.World), pool: map[int][][]byte{},
		bell: make(chan struct{}, 1),
		dead: make([]*Error, cfg.Identity.World), deathNotes: make(chan struct{})}
	gate, err := admit.New(admit.Config{Name: "data plane", MaxPending: maxPending, MaxPendingPerSource: maxPendingPerHost,
		Deadline: HandshakeTimeout, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	m.gate = gate
	n, me := cfg.Identity.World, cfg.Identity.Rank
	m.links = make([][]*Link, n)
	for p := range m.links {
		if p != me {
			m.links[p] = make([]*Link, cfg.Channels)
		}
	}
	type arrival struct {
		peer, channel int
		conn          net.Conn
		keys          FrameKeys
		fallback      string // why the link is not shared memory although it could be
		err           error
	}
	arrivals := make(chan arrival, n*cfg.Channels)
	var formed atomic.Bool // set once Connect stops taking arrivals
	defer formed.Store(true)
	m.acceptWG.Add(1)
	go func() {
		defer m.acceptWG.Done()
		m.acceptLoop(func(peer, ch int, c net.Conn, keys FrameKeys, fallback string) bool {
			if formed.Load() {
				return false
			}
			select {
			case arrivals <- arrival{peer: peer, channel: ch, conn: c, keys: keys, fallback: fallback}:
				return true
			default:
				return false
			}
		})
	}()
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for p := me + 1; p < n; p++ {
		for ch := 0; ch < cfg.Channels; ch++ {
			go func(p, ch int) {
				c, keys, fallback, err := m.dial(dctx, p, ch)
				arrivals <- arrival{peer: p, channel: ch, conn: c, keys: keys, fallback: fallback, err: err}
			}(p, ch)
		}
	}
	want := (n - 1) * cfg.Channels
	var firstErr error
	for got := 0; got < want; {
		select {
		case a := <-arrivals:
			if a.err != nil {
				if firstErr == nil {
					firstErr = a.err
				}
				got++
				continue
			}
			if a.peer < 0 || a.peer >= n || a.peer == me || m.links[a.peer][a.channel] != nil {
				m.log.Warn().Int("peer", a.peer).Int("channel", a.channel).Msg("duplicate connection refused")
				a.conn.Close()
				continue
			}
			l, err := newLink(m, a.peer, a.channel, a.conn, cfg.Link, &a.keys)
			if err != nil {
				a.conn.Close()
				if firstErr == nil {
					firstErr = err
				}
				got++
				continue
			}
			l.fallback = a.fallback
			m.links[a.peer][a.channel] = l
			got++
		case <-ctx.Done():
			if firstErr == nil {
				firstErr = fmt.Errorf("%w: ranks %s never connected", ctx.Err(), m.missing())
			}
			got = want
		}
	}
	if firstErr == nil && m.missing() != "" {
		firstErr = fmt.Errorf("ranks %s never connected", m.missing())
	}
	if firstErr != nil {
		m.refusedMu.Lock()
		if len(m.refused) > 0 {
			more := ""
			if m.nRefused > len(m.refused) {
				more = fmt.Sprintf(" (and %d more)", m.nRefused-len(m.refused))
			}
			firstErr = fmt.Errorf("%w; refused meanwhile: %s%s", firstErr, strings.Join(m.refused, "; "), more)
		}
		m.refusedMu.Unlock()
	}
	if firstErr != nil {
		cancel()
		m.closeAll()
		return nil, fmt.Errorf("transport: rank %d forming mesh: %w", me, firstErr)
	}
	m.logFallbacks()
	for p := range m.links {
		for _, l := range m.links[p] {
			l.start(&m.wg)
		}
	}
	return m, nil
}

// logFallbacks says once, at warn level, which links are slower than they
// could be and why (a failed shared-memory upgrade).
func (m *Mesh) logFallbacks() {
	var peers []int
	reason := ""
	for p, row := range m.links {
		for _, l := range row {
			if l != nil && l.fallback != "" {
				if reason == "" {
					reason = l.fallback
				}
				if len(peers) == 0 || peers[len(peers)-1] != p {
					peers = append(peers, p)
				}
			}
		}
	}
	if len(peers) > 0 {
		m.log.Warn().Ints("peers", peers).Str("reason", reason).
			Msg("transport: links to peers on this host fell back from shared memory to unix sockets (several times slower)")
	}
}

func (m *Mesh) missing() string {
	var miss []string
	for p, row := range m.links {
		for _, l := range row {
			if l == nil {
				miss = append(miss, fmt.Sprint(p))
				break
			}
		}
	}
	sort.Strings(miss)
	return strings.Join(miss, ",")
}

func (m *Mesh) dial(ctx context.Context, peer, ch int) (net.Conn, FrameKeys, string, error) {
	backoff := 10 * time.Millisecond
	for {
		c, err := m.cfg.Network.Dial(ctx, m.cfg.Endpoints[peer])
		if err == nil {
			var keys FrameKeys
			if keys, err = DialHandshake(ctx, c, m.id, peer, ch); err == nil {
				sc, fallback, err := upgradeShm(c, true, m.cfg.SharedMemory)
				if err != nil {
					c.Close()
					return nil, FrameKeys{}, "", fmt.Errorf("rank %d: %w", peer, err)
				}
				return sc, keys, fallback, nil
			}
			c.Close()
			if errors.Is(err, ErrAuth) || errors.Is(err, wire.ErrMalformed) || ctx.Err() != nil {
				return nil, FrameKeys{}, "", err // refusals do not heal by retrying
			}
			// Closed before a verdict: the peer is busy refusing strangers
			// (too many unauthenticated connections); try again.
		}
		select {
		case <-ctx.Done():
			return nil, FrameKeys{}, "", fmt.Errorf("dial rank %d: %w (last error: %v)", peer, ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Second)
	}
}

// Limits on connections that have not yet authenticated, so that strangers
// cannot make a rank hold unbounded memory or goroutines: each is one small
// handshake buffer and one goroutine, at most maxPending of them in all and
// maxPendingPerHost from one source (internal/admit evicts the oldest to
// make room), each for at most HandshakeTimeout (its Hello within
// HelloTimeout).
const (
	maxPending        = 64
	maxPendingPerHost = 16
	maxRefused        = 8 // refusals kept for the mesh-forming error
)

// acceptLoop authenticates every incoming connection; deliver hands an
// authenticated one to Connect (false once the mesh is complete). Refusals
// are logged by the admission gate, rate-limited, with the remote address.
func (m *Mesh) acceptLoop(deliver func(peer, ch int, c net.Conn, keys FrameKeys, fallback string) bool) {
	var wg sync.WaitGroup
	defer wg.Wait()
	defer m.gate.Flush()
	for {
		c, err := m.cfg.Listener.Accept()
		if err != nil {
			return
		}
		pass := m.gate.Admit(c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), HandshakeTimeout)
			defer cancel()
			hello, keys, err := AcceptHandshake(ctx, c, m.id)
			if err != nil {
				m.noteRefused(c, err)
				pass.Refuse("data-plane handshake failed", err)
				c.Close()
				return
			}
			if !pass.Authenticated() {
				return // the gate closed it meanwhile (its deadline, or to make room)
			}
			sc, fallback, err := upgradeShm(c, false, m.cfg.SharedMemory)
			if err != nil {
				m.log.Warn().Str("remote", c.RemoteAddr().String()).Err(err).Msg("shared-memory upgrade failed")
				c.Close()
				return
			}
			c = sc
			if int(hello.Rank) >= m.id.Rank || int(hello.Channel) >= m.cfg.Channels || !deliver(int(hello.Rank), int(hello.Channel), c, keys, fallback) {
				m.log.Warn().Str("remote", c.RemoteAddr().String()).Uint32("rank", hello.Rank).Msg("unexpected connection closed")
				c.Close()
			}
		}()
	}
}

// noteRefused keeps the first refusals for the error of a mesh that cannot
// form.
func (m *Mesh) noteRefused(c net.Conn, err error) {
	m.refusedMu.Lock()
	defer m.refusedMu.Unlock()
	m.nRefused++
	if len(m.refused) < maxRefused {
		m.refused = append(m.refused, fmt.Sprintf("%s: %v", c.RemoteAddr(), err))
	}
}

// Link returns the link to peer on channel.
func (m *Mesh) Link(peer, channel int) *Link { return m.links[peer][channel] }

// AllFast reports whether every link of this rank has a fastbox (every
// peer is on this host and the link was upgraded to shared memory).
func (m *Mesh) AllFast() bool {
	for _, row := range m.links {
		for _, l := range row {
			if _, ok := l.Fast(); !ok {
				return false
			}
		}
	}
	return true
}

// Rank returns this rank.
func (m *Mesh) Rank() int { return m.id.Rank }

// Failed is closed when the mesh has failed; Err then says why.
func (m *Mesh) Failed() <-chan struct{} { return m.failed }

// isFailed reports whether the mesh has failed and told its peers.
func (m *Mesh) isFailed() bool {
	select {
	case <-m.failed:
		return true
	default:
		return false
	}
}

// Err returns the failure that ended the mesh (an *Error), or nil.
func (m *Mesh) Err() error {
	if e := m.Failure(); e != nil {
		return e
	}
	return nil
}

// Failure returns the failure that ended the mesh, or nil.
func (m *Mesh) Failure() *Error {
	if !m.isFailed() {
		return nil
	}
	e := *m.err
	e.Local = m.id.Rank
	return &e
}

// Fail ends the mesh with e (the first failure wins) and tells every peer,
// even on a mesh that tolerates deaths: callers fail it when a collective
// broke half-way and its links may no longer agree.
func (m *Mesh) Fail(e *Error) { m.failAll(e) }

func (m *Mesh) fail(e *Error) {
	if m.cfg.TolerateDeaths && e.Rank >= 0 && e.Rank != m.id.Rank && e.Rank < len(m.dead) && !m.closingNow() && !m.failingNow() &&
		(e.Kind == KindPeerDied || e.Kind == KindSilent || e.Kind == KindClosed) {
		m.markDead(e)
		return
	}
	m.failAll(e)
}

// failAll ends the mesh with e. The aborts go out before Failed closes, so
// that no caller is released (and no process exits) before every peer has
// been told who failed first: a survivor that exits early must not be
// mistaken for the culprit by a peer that hears of its exit first.
func (m *Mesh) failAll(e *Error) {
	m.failOnce.Do(func() {
		m.failing.Store(true)
		m.err = e
		switch {
		case m.closingNow():
		case e.Kind == KindCanceled && e.Reporter == m.id.Rank:
			// This rank's caller canceled its own call (a shutdown on
			// Ctrl-C or SIGTERM, most often): the caller has the error,
			// and an error line would only be noise.
			m.log.Info().Err(e).Msg("communicator failed: the call was canceled")
		default:
			m.log.Error().Err(e).Msg("communicator failed")
		}
		a := &wire.AbortError{Origin: e.Reporter, Culprit: e.Rank, Code: uint8(e.Kind), Reason: e.Detail}
		if a.Origin < 0 {
			a.Origin = m.id.Rank
		}
		if e.Detail == "" && e.Err != nil {
			a.Reason = e.Err.Error()
		}
		for _, row := range m.links {
			for _, l := range row {
				if l != nil {
					l.markDead(e.Kind == KindClosed && e.Rank == m.id.Rank)
				}
			}
		}
		var wg sync.WaitGroup
		for p, row := range m.links {
			for _, l := range row {
				if l == nil || (p == e.Rank && e.Kind == KindPeerDied) {
					continue
				}
				wg.Add(1)
				go func() { defer wg.Done(); l.abort(a, m.cfg.AbortGrace) }()
			}
		}
		wg.Wait()
		close(m.failed)
	})
}

// Halt stops the links of a failed mesh and returns once their reader and
// writer goroutines have: no receive or send that a failed collective
// posted still folds into, copies into or reads from the caller's buffers
// afterwards (the caller may reuse them at once, as an elastic job does in
// its next generation). The executor halts before a failed call returns.
// The aborts have gone out by then (failAll writes them before Failed
// closes), so peers still learn who failed first. Shared-memory links are
// closed (the peer drains the ring, abort first, then reads end of
// stream); sockets are only interrupted with past deadlines, because
// closing a TCP socket with unread data resets the connection and the peer
// could lose the abort. Close releases them later. Halt does nothing on a
// mesh that has not failed.
func (m *Mesh) Halt() {
	select {
	case <-m.failed:
	default:
		return
	}
	m.haltOnce.Do(func() {
		m.halting.Store(true)
		past := time.Unix(1, 0)
		for _, row := range m.links {
			for _, l := range row {
				switch {
				case l == nil:
				case l.inPlace != nil:
					l.conn.Close()
				default:
					_ = l.conn.SetWriteDeadline(past)
					_ = l.conn.SetReadDeadline(past)
				}
			}
		}
		// Bounded like every wait: a goroutine that outlives the link
		// silence is reported, not waited for.
		done := make(chan struct{})
		go func() { m.wg.Wait(); close(done) }()
		t := time.NewTimer(m.cfg.Link.Silence)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			m.log.Error().Dur("after", m.cfg.Link.Silence).Msg("halt: link goroutines still running; the failed call's buffers may still be written")
		}
	})
}

// linger reads and discards what each socket link's peer still sends
// until the peer ends its stream or grace passes, all links at once. The
// links' readers must have stopped (Halt).
func (m *Mesh) linger(grace time.Duration) {
	deadline := time.Now().Add(grace)
	var wg sync.WaitGroup
	for _, row := range m.links {
		for _, l := range row {
			if l == nil || l.inPlace != nil {
				continue
			}
			wg.Go(func() {
				if l.conn.SetReadDeadline(deadline) == nil {
					_, _ = io.Copy(io.Discard, l.conn)
				}
			})
		}
	}
	wg.Wait()
}

// failingNow reports whether the mesh has started failing (its aborts may
// still be on their way).
func (m *Mesh) failingNow() bool { return m.failing.Load() }

func (m *Mesh) closingNow() bool {
	select {
	case <-m.closing:
		return true
	default:
		return false
	}
}

// markDead records a peer's death (first cause wins), closes its links and
// wakes anyone watching Deaths.
func (m *Mesh) markDead(e *Error) {
	m.deadMu.Lock()
	if m.dead[e.Rank] != nil {
		m.deadMu.Unlock()
		return
	}
	m.dead[e.Rank] = e
	m.anyDead.Store(true)
	close(m.deathNotes)
	m.deathNotes = make(chan struct{})
	m.deadMu.Unlock()
	m.log.Warn().Err(e).Int("peer", e.Rank).Msg("peer dead; continuing without it")
	for _, l := range m.links[e.Rank] {
		if l != nil {
			l.sever()
		}
	}
}

// DeadErr returns why rank r is dead, or nil if it is not known dead.
func (m *Mesh) DeadErr(r int) *Error {
	if !m.anyDead.Load() {
		return nil // the common case, without the lock
	}
	m.deadMu.Lock()
	defer m.deadMu.Unlock()
	if e := m.dead[r]; e != nil {
		c := *e
		c.Local = m.id.Rank
		return &c
	}
	return nil
}

// Dead lists the ranks known dead, ascending.
func (m *Mesh) Dead() []int { return m.deadWhere(func(*Error) bool { return true }) }

// Left lists the dead ranks that closed their communicator cleanly (their
// abort said so), ascending: a subset of Dead.
func (m *Mesh) Left() []int { return m.deadWhere(func(e *Error) bool { return e.Kind == KindClosed }) }

// deadWhere lists the dead ranks whose cause satisfies keep, ascending.
func (m *Mesh) deadWhere(keep func(*Error) bool) []int {
	m.deadMu.Lock()
	defer m.deadMu.Unlock()
	var out []int
	for r, e := range m.dead {
		if e != nil && keep(e) {
			out = append(out, r)
		}
	}
	return out
}

// Deaths returns a channel closed at the next death of a peer.
func (m *Mesh) Deaths() <-chan struct{} {
	m.deadMu.Lock()
	defer m.deadMu.Unlock()
	return m.deathNotes
}

// Close tells every peer this rank is leaving, then releases every
// connection and goroutine. It is safe to call more than once.
func (m *Mesh) Close() error {
	m.closeMu.Do(func() {
		close(m.closing)
		m.failAll(&Error{Kind: KindClosed, Rank: m.id.Rank, Reporter: m.id.Rank, Local: m.id.Rank, Detail: "communicator closed"})
		m.closeAll()
	})
	return nil
}

func (m *Mesh) closeAll() {
	m.cfg.Listener.Close()
	if e := m.err; e != nil && !(e.Kind == KindClosed && e.Rank == m.id.Rank) {
		// A failed mesh: its aborts are on their way, and closing a
		// socket with unread data resets the connection, which can
		// overtake the abort (a proxy or middlebox that sees the reset
		// may drop what it still holds for the peer, and the peer's
		// writes fail before its reader reaches the abort). Wait for
		// each peer to end its stream — a peer that reads the abort
		// fails and half-closes every link — draining what it still
		// sends, for at most the abort grace.
		m.Halt()
		m.linger(m.cfg.AbortGrace)
	}
	for _, row := range m.links {
		for _, l := range row {
			if l != nil {
				l.conn.Close()
			}
		}
	}
	m.wg.Wait()
	m.acceptWG.Wait()
}
