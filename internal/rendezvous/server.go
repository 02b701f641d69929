package rendezvous

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/admit"
)

// ServerConfig configures a coordinator.
type ServerConfig struct {
	JobID  string
	Secret []byte
	World  int
	Logger zerolog.Logger
	// IOTimeout bounds each read and write with an authenticated client
	// (0 = 30s).
	IOTimeout time.Duration
	// HandshakeTimeout bounds a client's time from connecting to proving
	// the job secret; a client that has not by then is closed
	// (0 = admit.DefaultDeadline).
	HandshakeTimeout time.Duration
	// MaxPending and MaxPendingPerSource bound the clients that have not
	// yet proved the secret, in all and per source IP (0 = admit's
	// defaults); at a limit the oldest such client makes room (see
	// internal/admit). Each holds at most MaxHandshakeMessage bytes of
	// input.
	MaxPending, MaxPendingPerSource int
}

// Validate checks the configuration.
func (c *ServerConfig) Validate() error {
	if c.JobID == "" {
		return fmt.Errorf("rendezvous: empty job id")
	}
	if c.World < 1 {
		return fmt.Errorf("rendezvous: world size %d must be positive", c.World)
	}
	if c.IOTimeout < 0 || c.HandshakeTimeout < 0 {
		return fmt.Errorf("rendezvous: negative timeout")
	}
	if c.MaxPending < 0 || c.MaxPendingPerSource < 0 {
		return fmt.Errorf("rendezvous: negative connection limit")
	}
	return nil
}

// Server is the coordinator. It serves any number of groups (one per
// communicator generation); a group completes when World ranks have
// registered with it.
type Server struct {
	cfg    ServerConfig
	gate   *admit.Gate
	mu     sync.Mutex
	groups map[string]*group
	// misfits are the refusals of ranks that cannot belong to this job as
	// configured (another world size, a rank outside it), by the rank
	// they claimed: the job cannot complete while one stands, so every
	// rank waiting and every rank registering in the meantime is refused
	// with it, at once, instead of waiting out its timeout. One is
	// dropped when that rank registers as it should, or after misfitTTL.
	misfits map[int]misfit
}

// misfit is a refusal that fails the job (Server.misfits).
type misfit struct {
	msg string
	at  time.Time
}

// misfitTTL bounds how long a refused rank keeps failing the others: a
// stray process of a long-lived coordinator's job must not do so forever.
const misfitTTL = time.Minute

type waiter struct {
	member      Member
	clientNonce []byte
	serverNonce []byte
	out         chan reply
}

type group struct {
	waiters map[int]*waiter
}

// NewServer validates cfg and returns a coordinator.
func NewServer(cfg ServerConfig) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.IOTimeout == 0 {
		cfg.IOTimeout = 30 * time.Second
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = admit.DefaultDeadline
	}
	gate, err := admit.New(admit.Config{
		Name: "rendezvous", MaxPending: cfg.MaxPending, MaxPendingPerSource: cfg.MaxPendingPerSource,
		Deadline: cfg.HandshakeTimeout, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("rendezvous: %w", err)
	}
	return &Server{cfg: cfg, gate: gate, groups: map[string]*group{}, misfits: map[int]misfit{}}, nil
}

// Serve accepts clients on ln until ctx ends; it then closes ln, delivers
// the answers of a group decided just before, and returns once every
// client's exchange has ended and ln is closed.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer s.gate.Flush()
	defer ln.Close() // waits for the close begun when ctx ended (p2p: the host's)
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("rendezvous: accept: %w", err)
		}
		pass := s.gate.Admit(c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			defer pass.Release()
			s.handle(ctx, c, pass)
		}()
	}
}

// authNotifier is implemented by connections whose transport also bounds
// unauthenticated peers below the rendezvous (internal/p2p's coordinator
// streams): the server tells it when the client has proved the secret.
type authNotifier interface{ Authenticated() }

func (s *Server) handle(ctx context.Context, c net.Conn, pass *admit.Pass) {
	log := s.cfg.Logger.With().Str("remote", c.RemoteAddr().String()).Logger()
	// Stopping the server cuts the exchange short, except the delivery of
	// a group's answer once decided (answer, below).
	var cut sync.Mutex
	answering := false
	stop := context.AfterFunc(ctx, func() {
		cut.Lock()
		defer cut.Unlock()
		if !answering {
			c.SetDeadline(time.Now())
		}
	})
	defer stop()
	answer := func(r reply) {
		cut.Lock()
		answering = true
		c.SetDeadline(time.Now().Add(s.cfg.IOTimeout))
		cut.Unlock()
		_ = writeMsg(c, r)
	}
	// Before the client proves the secret: one deadline for the whole
	// exchange, at most MaxHandshakeMessage bytes read, and nothing about
	// the job said.
	c.SetDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	nonce := make([]byte, 32)
	_, _ = rand.Read(nonce)
	if err := writeMsg(c, serverHello{Nonce: nonce}); err != nil {
		return
	}
	var a auth
	if err := readMsg(c, &a, MaxHandshakeMessage); err != nil {
		pass.Refuse("bad handshake", err)
		return
	}
	if a.Version != ProtocolVersion {
		pass.Refuse(fmt.Sprintf("protocol version %d", a.Version), nil)
		_ = writeMsg(c, authAck{Error: fmt.Sprintf("rendezvous protocol version %d, this coordinator speaks %d (mixed ringtail versions?)", a.Version, ProtocolVersion)})
		return
	}
	if !hmac.Equal(a.MAC, clientMAC(s.cfg.Secret, nonce, &a)) {
		pass.Refuse("authentication failed: wrong job secret", nil)
		_ = writeMsg(c, authAck{Error: "authentication failed: wrong job secret"})
		return
	}
	if !pass.Authenticated() {
		return // the gate closed c meanwhile
	}
	if n, ok := c.(authNotifier); ok {
		n.Authenticated()
	}
	c.SetDeadline(time.Now().Add(s.cfg.IOTimeout))
	// The refused rank is told why, and so are the others when the
	// refusal fails the job (misfit): the log says it at info level only.
	refuse := func(msg string) {
		log.Info().Str("reason", msg).Msg("rendezvous: refused")
		_ = writeMsg(c, authAck{Error: msg})
	}
	switch {
	case a.Job != s.cfg.JobID:
		refuse(fmt.Sprintf("job %q, this coordinator serves job %q", a.Job, s.cfg.JobID))
		return
	case a.World != s.cfg.World:
		refuse(fmt.Sprintf("world size %d, this job has %d ranks", a.World, s.cfg.World))
		s.misfit(a.Rank, fmt.Sprintf("rank %d was started with world size %d, this job has %d ranks: give every rank the same WORLD_SIZE", a.Rank, a.World, s.cfg.World))
		return
	case a.Rank < 0 || a.Rank >= s.cfg.World:
		refuse(fmt.Sprintf("rank %d outside 0..%d", a.Rank, s.cfg.World-1))
		s.misfit(a.Rank, fmt.Sprintf("a rank was started as rank %d, outside 0..%d of this job's %d ranks: give each rank a RANK below WORLD_SIZE", a.Rank, s.cfg.World-1, s.cfg.World))
		return
	case a.Size < 0 || a.Size > MaxMessage:
		refuse(fmt.Sprintf("registration of %d bytes exceeds %d", a.Size, MaxMessage))
		return
	}
	if err := writeMsg(c, authAck{OK: true}); err != nil {
		return
	}
	body, err := readRaw(c, a.Size)
	if err != nil {
		log.Warn().Err(err).Msg("rendezvous: bad registration")
		return
	}
	var m Member
	if sum := sha256.Sum256(body); len(body) != a.Size || !hmac.Equal(sum[:], a.Digest) {
		log.Warn().Msg("rendezvous: registration does not match its authenticated digest")
		_ = writeMsg(c, reply{Error: "registration does not match its authenticated digest"})
		return
	}
	if err := json.Unmarshal(body, &m); err != nil || m.Rank != a.Rank {
		log.Warn().Err(err).Int("rank", m.Rank).Msg("rendezvous: bad registration")
		_ = writeMsg(c, reply{Error: "malformed registration"})
		return
	}
	w := &waiter{member: m, clientNonce: a.Nonce, serverNonce: nonce, out: make(chan reply, 1)}
	if msg := s.join(a.Group, w); msg != "" {
		log.Info().Str("reason", msg).Msg("rendezvous: refused")
		_ = writeMsg(c, reply{Error: msg})
		return
	}
	// Wait (without a deadline) for the group to fill, noticing if the
	// client hangs up meanwhile.
	c.SetDeadline(time.Time{})
	gone := make(chan struct{})
	go func() {
		var b [1]byte
		_, _ = c.Read(b[:]) // returns when the client closes or a deadline fires
		close(gone)
	}()
	select {
	case r := <-w.out:
		answer(r)
	case <-gone:
	case <-ctx.Done():
	}
	if !answering {
		// A decided answer is always delivered: stopping the server (the
		// rank hosting it stops it as soon as it has its own answer, a
		// refusal say) also cuts the read above short, and every rank
		// must still hear the answer, not retry against a closed port
		// until its connect timeout. After leaving, none can come.
		s.leave(a.Group, w)
		select {
		case r := <-w.out:
			answer(r)
		default:
			c.SetDeadline(time.Now())
		}
	}
	<-gone
	if answering {
		// Linger until the client hangs up, having read the answer
		// (IOTimeout at most; at once if it already has): over libp2p
		// the answer is on the wire only once the session has flushed
		// it, and the host may close right after.
		var b [1]byte
		_, _ = c.Read(b[:])
	}
}

// misfit records a refusal that fails the job (Server.misfits) and
// answers every rank waiting with it.
func (s *Server) misfit(rank int, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.misfits[rank] = misfit{msg: msg, at: time.Now()}
	for key, g := range s.groups {
		for _, w := range g.waiters {
			w.out <- reply{Error: msg}
		}
		delete(s.groups, key)
	}
}

// standingMisfit returns the message of a misfit still in force (the
// lowest rank's), dropping those of rank, who registers as it should
// now, and those older than misfitTTL; "" when none.
func (s *Server) standingMisfit(rank int) string {
	delete(s.misfits, rank)
	best, msg := 0, ""
	for r, m := range s.misfits {
		if time.Since(m.at) > misfitTTL {
			delete(s.misfits, r)
			continue
		}
		if msg == "" || r < best {
			best, msg = r, m.msg
		}
	}
	return msg
}

func (s *Server) join(key string, w *waiter) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if msg := s.standingMisfit(w.member.Rank); msg != "" {
		return msg
	}
	g := s.groups[key]
	if g == nil {
		g = &group{waiters: map[int]*waiter{}}
		s.groups[key] = g
	}
	if _, dup := g.waiters[w.member.Rank]; dup {
		return fmt.Sprintf("rank %d already registered in group %q", w.member.Rank, key)
	}
	g.waiters[w.member.Rank] = w
	if len(g.waiters) < s.cfg.World {
		return ""
	}
	delete(s.groups, key)
	ranks := make([]int, 0, len(g.waiters))
	for r := range g.waiters {
		ranks = append(ranks, r)
	}
	sort.Ints(ranks)
	members := make([]Member, 0, len(ranks))
	for _, r := range ranks {
		members = append(members, g.waiters[r].member)
	}
	errMsg := settingsMismatch(members)
	for _, r := range ranks {
		wr := g.waiters[r]
		if errMsg != "" {
			wr.out <- reply{Error: errMsg}
			continue
		}
		wr.out <- reply{MAC: serverMAC(s.cfg.Secret, wr.clientNonce, wr.serverNonce), Members: members}
	}
	return ""
}

func (s *Server) leave(key string, w *waiter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.groups[key]; g != nil && g.waiters[w.member.Rank] == w {
		delete(g.waiters, w.member.Rank)
	}
}

// settingsMismatch names the first setting on which a rank disagrees with
// rank 0, or returns "".
func settingsMismatch(ms []Member) string {
	ref := ms[0]
	keys := make([]string, 0, len(ref.Settings))
	for k := range ref.Settings {
		keys = append(keys, k)
	}
	for _, m := range ms[1:] {
		for k := range m.Settings {
			if _, ok := ref.Settings[k]; !ok {
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	for _, m := range ms[1:] {
		for _, k := range keys {
			if m.Settings[k] != ref.Settings[k] {
				return fmt.Sprintf("ranks disagree on %s: rank %d has %q, rank %d has %q", k, ref.Rank, ref.Settings[k], m.Rank, m.Settings[k])
			}
		}
	}
	return ""
}
