package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/elastic/shard"
	"github.com/ringtail-ml/ringtail/elastic/shard/wal"
	"github.com/ringtail-ml/ringtail/internal/admit"
)

// ServerConfig configures a Server.
type ServerConfig struct {
	// Secret is the job secret (at least MinSecretLen bytes).
	Secret []byte
	// HandshakeTimeout bounds authentication of a new connection (0: 5 s).
	HandshakeTimeout time.Duration
	// WriteTimeout bounds writing one response (0: 10 s).
	WriteTimeout time.Duration
	// IdleTimeout closes connections silent for this long (0: never;
	// workers hold their connection while they train a shard).
	IdleTimeout time.Duration
	// KeepShardsOnDisconnect disables releasing a worker's DOING shards
	// when its last connection closes.
	KeepShardsOnDisconnect bool
	// RestartGrace is how long after Serve starts the workers that already
	// hold DOING shards (from the store) have to reconnect before their
	// shards go back to TODO (0: 30 s; negative: never).
	RestartGrace time.Duration
	// MaxConns bounds concurrent authenticated connections (0: 4096);
	// a client that proves the secret while it is reached is told the
	// service is unavailable.
	MaxConns int
	// MaxPending and MaxPendingPerSource bound the connections that have
	// not yet proved the secret, in all and per source IP (0:
	// internal/admit's defaults). They never count against MaxConns, and
	// at a limit the oldest such connection makes room, so idle strangers
	// cannot lock workers out; each holds at most a 512-byte handshake
	// frame, and is closed after HandshakeTimeout.
	MaxPending, MaxPendingPerSource int
	// Open, used when NewServer is given no store, opens the store for the
	// shard config the first worker declares (ClientConfig.Job): a
	// launcher that does not know the job's data serves it this way. Later
	// declarations must equal it (else wal.ErrConfigMismatch). The server
	// closes a store it opened when Serve returns.
	Open func(shard.Config) (*wal.Store, error)
	// Logger receives connection and liveness events.
	Logger zerolog.Logger
}

// Validate reports unusable configuration.
func (c ServerConfig) Validate() error {
	if len(c.Secret) < MinSecretLen {
		return fmt.Errorf("service: job secret of %d bytes is shorter than %d", len(c.Secret), MinSecretLen)
	}
	if c.HandshakeTimeout < 0 || c.WriteTimeout < 0 || c.IdleTimeout < 0 || c.MaxConns < 0 || c.MaxPending < 0 || c.MaxPendingPerSource < 0 {
		return errors.New("service: negative timeout or connection limit")
	}
	return nil
}

// Server serves one job's shard queue. Its store is owned by a single
// event-loop goroutine; connection goroutines send it calls.
type Server struct {
	cfg   ServerConfig
	store *wal.Store // owned by the loop once Serve runs; nil until opened (ServerConfig.Open)
	log   zerolog.Logger
	gate  *admit.Gate // connections that have not authenticated
	slots chan struct{}

	calls  chan call
	closes chan int
	served bool
	mu     sync.Mutex // guards served
}

// call is one request for the loop; reply is buffered (capacity 1).
type call struct {
	conn  int // 0: from the server's own methods (Release, Stats)
	cmd   shard.Command
	stats bool
	open  *shard.Config // declare the job's data (opens the store)
	reply chan reply
}

type reply struct {
	res   shard.Result
	stats shard.Stats
	err   error
}

// NewServer returns a server for the job whose state is in store. The
// server becomes the store's only user. With a nil store, cfg.Open opens
// one when the first worker declares the job's data.
func NewServer(cfg ServerConfig, store *wal.Store) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if store == nil && cfg.Open == nil {
		return nil, errors.New("service: no store and no way to open one")
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = 5 * time.Second
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.RestartGrace == 0 {
		cfg.RestartGrace = 30 * time.Second
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = 4096
	}
	gate, err := admit.New(admit.Config{
		Name: "shard-service", MaxPending: cfg.MaxPending, MaxPendingPerSource: cfg.MaxPendingPerSource,
		Deadline: cfg.HandshakeTimeout, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	return &Server{
		cfg: cfg, store: store, gate: gate, slots: make(chan struct{}, cfg.MaxConns),
		log:   cfg.Logger.With().Str("component", "shard-service").Logger(),
		calls: make(chan call), closes: make(chan int),
	}, nil
}

// Serve accepts workers on ln until ctx is cancelled (then it returns nil)
// or the store fails (then it returns the error). It closes ln. Stopping
// does not release any shard: like a crash, workers reconnect to the next
// server started on the same store and report what they hold.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.served {
		s.mu.Unlock()
		return errors.New("service: Serve called twice")
	}
	s.served = true
	s.mu.Unlock()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	loopQuit := make(chan struct{})
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		s.loop(ctx, cancel, loopQuit)
	}()
	stopAccept := context.AfterFunc(ctx, func() { ln.Close() })
	defer stopAccept()

	var conns sync.WaitGroup
	defer s.gate.Flush()
	s.log.Info().Str("addr", ln.Addr().String()).Msg("shard service listening")
	var acceptErr error
	for id := 1; ; id++ {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil {
				acceptErr = fmt.Errorf("service: accept: %w", err)
				cancel(acceptErr)
			}
			break
		}
		pass := s.gate.Admit(c)
		conns.Add(1)
		go func(id int, c net.Conn) {
			defer conns.Done()
			defer pass.Release()
			s.handle(ctx, id, c, pass, loopDone)
		}(id, c)
	}
	conns.Wait()
	close(loopQuit)
	<-loopDone
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

// loop owns the store and the liveness bookkeeping below.
func (s *Server) loop(ctx context.Context, fail context.CancelCauseFunc, quit <-chan struct{}) {
	connWorkers := map[int]map[string]bool{} // workers seen on each live connection
	liveConns := map[string]int{}            // live connections per worker
	seen := map[string]bool{}                // workers heard from since start
	var holders []string                     // DOING holders restored from disk

	var grace <-chan time.Time
	opened := func() {
		holders = s.store.Holders()
		if s.cfg.RestartGrace > 0 && len(holders) > 0 {
			t := time.NewTimer(s.cfg.RestartGrace)
			grace = t.C
		}
	}
	if s.store != nil {
		opened()
	}
	defer func() {
		if s.cfg.Open != nil && s.store != nil {
			if err := s.store.Close(); err != nil {
				s.log.Warn().Err(err).Msg("closing the shard store")
			}
		}
	}()
	died := func(w, why string) {
		res, err := s.store.Apply(shard.Command{Op: shard.OpDied, Worker: w})
		if err != nil {
			s.log.Error().Err(err).Str("worker", w).Msg("could not release shards")
			fail(err)
			return
		}
		if len(res.Requeued) > 0 {
			s.log.Info().Str("worker", w).Str("reason", why).Ints64("requeued", res.Requeued).Msg("worker gone; shards back to TODO")
		}
	}
	for {
		select {
		case c := <-s.calls:
			switch {
			case c.open != nil:
				was := s.store != nil
				err := s.open(*c.open)
				if !was && s.store != nil {
					opened()
				}
				c.reply <- reply{err: err}
				continue
			case s.store == nil:
				c.reply <- reply{err: ErrNotOpen}
				continue
			case c.stats:
				c.reply <- reply{stats: s.store.Stats()}
				continue
			}
			w := c.cmd.Worker
			if c.conn != 0 {
				if ws := connWorkers[c.conn]; ws == nil {
					connWorkers[c.conn] = map[string]bool{}
				}
				if !connWorkers[c.conn][w] {
					connWorkers[c.conn][w] = true
					liveConns[w]++
				}
				seen[w] = true
			}
			res, err := s.store.Apply(c.cmd)
			if errors.Is(err, wal.ErrFailed) {
				fail(err)
				err = fmt.Errorf("%w: %v", ErrUnavailable, err)
			}
			c.reply <- reply{res: res, err: err}
		case id := <-s.closes:
			for w := range connWorkers[id] {
				liveConns[w]--
				if liveConns[w] > 0 {
					continue
				}
				delete(liveConns, w)
				if ctx.Err() == nil && !s.cfg.KeepShardsOnDisconnect {
					died(w, "disconnected")
				}
			}
			delete(connWorkers, id)
		case <-grace:
			for _, w := range holders {
				if !seen[w] && liveConns[w] == 0 {
					died(w, "did not reconnect after restart")
				}
			}
		case <-quit:
			return
		}
	}
}

// open declares the job's data: it opens the store (ServerConfig.Open)
// the first time, and checks later declarations against its config.
// Called by the loop.
func (s *Server) open(cfg shard.Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if s.store != nil {
		if got := s.store.Config(); got != cfg {
			return fmt.Errorf("%w: the service holds %+v, the worker declared %+v", wal.ErrConfigMismatch, got, cfg)
		}
		return nil
	}
	if s.cfg.Open == nil {
		return fmt.Errorf("%w: no store to open", ErrNotOpen)
	}
	store, err := s.cfg.Open(cfg)
	if err != nil {
		return fmt.Errorf("service: opening the shard store: %w", err)
	}
	s.store = store
	s.log.Info().Int64("samples", cfg.Samples).Int64("shards_per_epoch", cfg.NumShards()).Int("epochs", cfg.Epochs).Msg("shard store opened")
	return nil
}

// Release reports worker gone (its DOING shard goes back to TODO) on
// behalf of whoever knows it died: a launcher that watches the job's
// membership calls it when the failure detector declares a node dead, a
// case the connection-based liveness misses when the node's host is cut
// off (its connection stays open). It needs Serve to be running.
func (s *Server) Release(ctx context.Context, worker string) ([]int64, error) {
	r, err := s.internal(ctx, call{cmd: shard.Command{Op: shard.OpDied, Worker: worker}})
	return r.res.Requeued, err
}

// Stats returns the queue's summary (ErrNotOpen before a worker declared
// the job's data). It needs Serve to be running.
func (s *Server) Stats(ctx context.Context) (shard.Stats, error) {
	r, err := s.internal(ctx, call{stats: true})
	return r.stats, err
}

// internal hands a call of the server's own to the loop.
func (s *Server) internal(ctx context.Context, c call) (reply, error) {
	if !c.stats {
		if err := c.cmd.Validate(); err != nil {
			return reply{}, err
		}
	}
	c.reply = make(chan reply, 1)
	select {
	case s.calls <- c:
	case <-ctx.Done():
		return reply{}, ctx.Err()
	}
	select {
	case r := <-c.reply:
		return r, r.err
	case <-ctx.Done():
		return reply{}, ctx.Err()
	}
}

// errFull is what a client that authenticates while MaxConns connections
// are open is told.
var errFull = fmt.Errorf("%w: connection limit reached", ErrUnavailable)

// handle serves one connection: the handshake under the gate, then, with
// an authenticated slot, the requests.
func (s *Server) handle(ctx context.Context, id int, c net.Conn, pass *admit.Pass, loopDone <-chan struct{}) {
	log := s.log.With().Int("conn", id).Str("remote", c.RemoteAddr().String()).Logger()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	defer c.Close()

	c.SetDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	slot := false
	defer func() {
		if slot {
			<-s.slots
		}
	}()
	err := serverHandshake(c, s.cfg.Secret, func() error {
		if !pass.Authenticated() {
			return admit.ErrClosed // the gate closed c meanwhile
		}
		select {
		case s.slots <- struct{}{}:
			slot = true
			return nil
		default:
			log.Warn().Int("max_conns", s.cfg.MaxConns).Msg("authenticated connection refused: connection limit reached")
			return errFull
		}
	})
	if err != nil {
		if !slot && !errors.Is(err, errFull) && !errors.Is(err, admit.ErrClosed) {
			pass.Refuse("handshake failed", err)
		}
		return
	}
	c.SetDeadline(time.Time{})
	defer func() {
		select {
		case s.closes <- id:
		case <-loopDone:
		}
	}()
	for {
		if s.cfg.IdleTimeout > 0 {
			c.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
		}
		var req request
		if err := readMsg(c, &req); err != nil {
			if errors.Is(err, ErrProtocol) {
				log.Warn().Err(err).Msg("closing connection")
			}
			return
		}
		resp := s.dispatch(ctx, id, req, loopDone)
		c.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		if err := writeMsg(c, resp); err != nil {
			return
		}
	}
}

// dispatch turns a request into a loop call and the reply into a response.
func (s *Server) dispatch(ctx context.Context, conn int, req request, loopDone <-chan struct{}) response {
	resp := response{ID: req.ID}
	cl := call{conn: conn, reply: make(chan reply, 1)}
	switch req.Op {
	case opPull:
		cl.cmd = shard.Command{Op: shard.OpPull, Worker: req.Worker}
	case opDone:
		cl.cmd = shard.Command{Op: shard.OpDone, Worker: req.Worker, Shard: req.Shard}
	case opFail:
		cl.cmd = shard.Command{Op: shard.OpFail, Worker: req.Worker, Shard: req.Shard}
	case opStats:
		cl.stats = true
	case opOpen:
		if req.Config == nil {
			resp.Error = toWire(fmt.Errorf("%w: open without a config", ErrProtocol))
			return resp
		}
		cl.open = req.Config
	default:
		resp.Error = toWire(fmt.Errorf("%w: unknown op %q", ErrProtocol, req.Op))
		return resp
	}
	if !cl.stats && cl.open == nil {
		if err := cl.cmd.Validate(); err != nil {
			resp.Error = toWire(err)
			return resp
		}
	}
	select {
	case s.calls <- cl:
	case <-ctx.Done():
		resp.Error = toWire(fmt.Errorf("%w: server stopping", ErrUnavailable))
		return resp
	case <-loopDone:
		resp.Error = toWire(fmt.Errorf("%w: server stopped", ErrUnavailable))
		return resp
	}
	r := <-cl.reply
	if r.err != nil {
		resp.Error = toWire(r.err)
		return resp
	}
	if cl.stats {
		resp.Stats = &r.stats
		return resp
	}
	if cl.open != nil {
		return resp
	}
	sh := r.res.Shard
	resp.Shard, resp.Duplicate = &sh, r.res.Duplicate
	return resp
}
