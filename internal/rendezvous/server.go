package rendezvous

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"fmt"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// ServerConfig configures a coordinator.
type ServerConfig struct {
	JobID  string
	Secret []byte
	World  int
	Logger zerolog.Logger
	// IOTimeout bounds each read and write with one client (0 = 30s).
	IOTimeout time.Duration
}

// Validate checks the configuration.
func (c *ServerConfig) Validate() error {
	if c.JobID == "" {
		return fmt.Errorf("rendezvous: empty job id")
	}
	if c.World < 1 {
		return fmt.Errorf("rendezvous: world size %d must be positive", c.World)
	}
	if c.IOTimeout < 0 {
		return fmt.Errorf("rendezvous: negative IO timeout")
	}
	return nil
}

// Server is the coordinator. It serves any number of groups (one per
// communicator generation); a group completes when World ranks have
// registered with it.
type Server struct {
	cfg    ServerConfig
	mu     sync.Mutex
	groups map[string]*group
}

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
	return &Server{cfg: cfg, groups: map[string]*group{}}, nil
}

// Serve accepts clients on ln until ctx ends; it then closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("rendezvous: accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			s.handle(ctx, c)
		}()
	}
}

func (s *Server) handle(ctx context.Context, c net.Conn) {
	log := s.cfg.Logger.With().Str("remote", c.RemoteAddr().String()).Logger()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	c.SetDeadline(time.Now().Add(s.cfg.IOTimeout))
	nonce := make([]byte, 32)
	_, _ = rand.Read(nonce)
	if err := writeMsg(c, serverHello{Nonce: nonce}); err != nil {
		return
	}
	var reg register
	if err := readMsg(c, &reg); err != nil {
		log.Warn().Err(err).Msg("rendezvous: bad registration")
		return
	}
	refuse := func(msg string) {
		log.Warn().Str("reason", msg).Msg("rendezvous: refused")
		_ = writeMsg(c, reply{Error: msg})
	}
	if !hmac.Equal(reg.MAC, clientMAC(s.cfg.Secret, nonce, &reg)) {
		refuse("authentication failed: wrong job secret")
		return
	}
	switch {
	case reg.Job != s.cfg.JobID:
		refuse(fmt.Sprintf("job %q, this coordinator serves job %q", reg.Job, s.cfg.JobID))
		return
	case reg.World != s.cfg.World:
		refuse(fmt.Sprintf("world size %d, this job has %d ranks", reg.World, s.cfg.World))
		return
	case reg.Member.Rank < 0 || reg.Member.Rank >= s.cfg.World:
		refuse(fmt.Sprintf("rank %d outside 0..%d", reg.Member.Rank, s.cfg.World-1))
		return
	}
	w := &waiter{member: reg.Member, clientNonce: reg.Nonce, serverNonce: nonce, out: make(chan reply, 1)}
	if msg := s.join(reg.Group, w); msg != "" {
		refuse(msg)
		return
	}
	// Wait (without a deadline) for the group to fill, noticing if the
	// client hangs up meanwhile.
	c.SetDeadline(time.Time{})
	gone := make(chan struct{})
	go func() {
		var b [1]byte
		_, _ = c.Read(b[:]) // returns when the client closes or the deadline below fires
		close(gone)
	}()
	select {
	case r := <-w.out:
		c.SetDeadline(time.Now().Add(s.cfg.IOTimeout))
		_ = writeMsg(c, r)
	case <-gone:
		s.leave(reg.Group, w)
	case <-ctx.Done():
	}
	c.SetDeadline(time.Now())
	<-gone
}

func (s *Server) join(key string, w *waiter) string {
	s.mu.Lock()
	defer s.mu.Unlock()
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
