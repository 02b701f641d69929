package elastic

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	ma "github.com/multiformats/go-multiaddr"
	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/elastic/view"
	"github.com/ringtail-ml/ringtail/internal/p2p"
	"github.com/ringtail-ml/ringtail/internal/rendezvous"
)

// Worker is one process's membership in an elastic job. Create it with
// Join; drive training with Run; Close it when done.
type Worker struct {
	cfg   Config
	name  string
	log   zerolog.Logger
	clock Clock
	ml    *memberlist.Memberlist
	addr  string // this node's memberlist host:port (fixed once Join has created the list)
	box   *mailbox
	state *published

	reqs      chan any // requests to the loop
	root      context.Context
	stop      context.CancelFunc
	loopDone  chan struct{}  // closed when the loop has returned
	wg        sync.WaitGroup // the loop's helper goroutines: sends, rendezvous servers, joins
	closeOnce sync.Once
	mlMu      sync.Mutex // guards mlShut: Leave after Shutdown panics in memberlist
	mlShut    bool       // guarded by mlMu

	// Owned by the loop goroutine.
	d        *view.Decider
	genCtx   context.Context         // ends when the adopted view is superseded or the node must stop
	genStop  context.CancelCauseFunc // cancels genCtx
	waiters  []awaitReq
	coords   map[uint64]context.CancelFunc // rendezvous servers this node hosts, by generation
	peers    map[string]string             // live nodes (self included): name → memberlist host:port, from the delegate's events
	resendAt time.Time
	rejoinAt time.Time
	joining  bool
	fatal    error

	// Owned by the goroutine calling Join, then Run.
	comm     *ringtail.Comm
	gctx     context.Context // the generation of comm: ends when it is superseded
	gen      Generation
	steps    uint64
	stepCtx  context.Context
	stepStop context.CancelFunc

	curMu   sync.Mutex // guards the copy below, for Close
	curComm *ringtail.Comm
}

// Requests to the loop.
type (
	awaitReq struct {
		after uint64
		reply chan awaitResp // capacity 1
	}
	awaitResp struct {
		v   view.View
		ctx context.Context
		err error
	}
	reportReq struct {
		gen   uint64
		blame string // node named by a peer-died failure, or ""
	}
	formedReq struct{ gen uint64 }
	joinedReq struct{}
)

// Join starts this node's membership (memberlist on BindAddr:BindPort,
// joined to Seeds) and returns once the first generation that includes it
// has formed: at start-up that is the barrier — no rank starts before
// InitialNP nodes have joined; a node joining a running job returns when
// the job's proposer has added it. ctx bounds the wait.
func Join(ctx context.Context, cfg Config) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	key, err := MemberlistKey(cfg.Secret, cfg.JobID)
	if err != nil {
		return nil, err
	}
	var suffix [8]byte
	_, _ = rand.Read(suffix[:])
	name := cfg.ID + "." + hex.EncodeToString(suffix[:])
	clock := cfg.Clock
	if clock == nil {
		clock = wallClock{}
	}
	log := cfg.Logger.With().Str("node", name).Logger()
	d, err := view.New(cfg.deciderConfig(name), clock.Now())
	if err != nil {
		return nil, err
	}
	w := &Worker{
		cfg: cfg, name: name, log: log, clock: clock, box: newMailbox(), state: &published{},
		reqs: make(chan any), loopDone: make(chan struct{}), d: d, coords: map[uint64]context.CancelFunc{},
		peers: map[string]string{},
	}
	w.root, w.stop = context.WithCancel(context.Background())
	dg := newDelegate(name, w.box, w.state)
	ml, err := memberlist.Create(memberlistConfig(&cfg, name, key, dg, log))
	if err != nil {
		w.stop()
		return nil, fmt.Errorf("elastic: starting memberlist on %s:%d: %w", cfg.BindAddr, cfg.BindPort, err)
	}
	w.ml = ml
	if w.addr = dg.localAddr(); w.addr == "" {
		_ = ml.Shutdown()
		w.stop()
		return nil, fmt.Errorf("elastic: memberlist on %s:%d did not announce this node", cfg.BindAddr, cfg.BindPort)
	}
	// Join the seeds before the loop decides anything, so that a node
	// joining a running job learns its view (push/pull state) before it
	// could mistake itself for the first node of a new job.
	if seeds := w.otherSeeds(nil); len(seeds) > 0 {
		if _, err := ml.Join(seeds); err != nil {
			log.Info().Err(err).Msg("elastic: no seed reachable yet; waiting to be joined")
		}
	}
	w.rejoinAt = clock.Now().Add(cfg.Timers.Rejoin)
	go w.loop()
	if err := w.advance(ctx, 0); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// Name returns this node's name (its ID plus an incarnation suffix).
func (w *Worker) Name() string { return w.name }

// Close leaves the job gracefully (peers re-form at once), stops the
// membership loop and closes the communicator. Call it after Run returns.
//
// The order matters: the loop stops first (no tick, send or join starts
// after it), then its helpers finish (sends, joins, rendezvous servers),
// and only then does this node leave and shut
// memberlist down, so no call reaches a list that has left or is shutting
// down.
func (w *Worker) Close() error {
	w.closeOnce.Do(func() {
		w.stop()
		<-w.loopDone
		w.wg.Wait()
		w.leave()
		w.shutdown()
		w.curMu.Lock()
		c := w.curComm
		w.curMu.Unlock()
		if c != nil {
			c.Close()
		}
	})
	return nil
}

// leave announces that this node leaves (peers drop it at once instead
// of waiting for the failure detector).
func (w *Worker) leave() {
	w.mlMu.Lock()
	defer w.mlMu.Unlock()
	if !w.mlShut {
		_ = w.ml.Leave(w.cfg.Timers.TCPTimeout)
	}
}

func (w *Worker) shutdown() {
	w.mlMu.Lock()
	defer w.mlMu.Unlock()
	w.mlShut = true
	_ = w.ml.Shutdown()
}

// send hands a request to the loop.
func (w *Worker) send(ctx context.Context, r any) error {
	select {
	case w.reqs <- r:
		return nil
	case <-w.loopDone:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// post hands a request to the loop from a helper goroutine or the caller's,
// giving up only when the worker closes.
func (w *Worker) post(r any) {
	select {
	case w.reqs <- r:
	case <-w.loopDone:
	case <-w.root.Done():
	}
}

// loop is the goroutine that owns the membership state.
func (w *Worker) loop() {
	defer close(w.loopDone)
	t := time.NewTicker(w.cfg.Timers.Tick)
	defer t.Stop()
	for _, e := range w.box.take() {
		w.onEvent(e)
	}
	for {
		select {
		case <-w.root.Done():
			for g, c := range w.coords {
				c()
				delete(w.coords, g)
			}
			if w.genStop != nil {
				w.genStop(ErrClosed)
			}
			for _, a := range w.waiters {
				a.reply <- awaitResp{err: ErrClosed}
			}
			return
		case <-w.box.signal:
			for _, e := range w.box.take() {
				w.onEvent(e)
			}
		case r := <-w.reqs:
			w.onRequest(r)
		case <-t.C:
			w.d.Tick(w.clock.Now())
			w.onTick()
		}
		w.act()
	}
}

// act carries out what the decider wants and answers waiting callers.
func (w *Worker) act() {
	if w.fatal == nil {
		r := w.d.Ready()
		if r.Fail != nil {
			w.die(fmt.Errorf("elastic: %s: %w", w.name, r.Fail))
		} else if r.Propose != nil {
			w.propose(*r.Propose)
		}
	}
	v := w.d.View()
	keep := w.waiters[:0]
	for _, a := range w.waiters {
		switch {
		case w.fatal != nil:
			a.reply <- awaitResp{err: w.fatal}
		case v.Gen > a.after && v.Contains(w.name):
			a.reply <- awaitResp{v: v, ctx: w.genCtx}
		default:
			keep = append(keep, a)
		}
	}
	w.waiters = keep
}

// die stops this node's participation with err (below min-np).
func (w *Worker) die(err error) {
	if w.fatal != nil {
		return
	}
	w.fatal = err
	w.log.Error().Err(err).Msg("elastic: stopping")
	if w.genStop != nil {
		w.genStop(err)
	}
}

// propose hosts a rendezvous for the decider's proposal, adopts the view
// and sends it to every node.
func (w *Worker) propose(p view.Proposal) {
	ln, coord, err := w.listenRendezvous()
	if err != nil {
		w.log.Error().Err(err).Uint64("gen", p.Gen).Msg("elastic: cannot host the rendezvous; retrying")
		return
	}
	srv, err := rendezvous.NewServer(rendezvous.ServerConfig{
		JobID: w.cfg.JobID, Secret: w.cfg.Secret, World: len(p.Members), Logger: w.log, IOTimeout: w.cfg.FormTimeout,
	})
	if err != nil {
		ln.Close()
		w.log.Error().Err(err).Msg("elastic: rendezvous")
		return
	}
	ctx, cancel := context.WithCancel(w.root)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		_ = srv.Serve(ctx, ln)
	}()
	v := view.View{Gen: p.Gen, Members: p.Members, Proposer: w.name, Coord: coord}
	w.coords[v.Gen] = cancel
	if !w.d.Receive(v, w.clock.Now()) {
		cancel()
		delete(w.coords, v.Gen)
		return
	}
	w.adopt(v)
}

// listenRendezvous opens a generation's rendezvous on the libp2p control
// plane: a host whose identity derives from the job secret and id, as the
// ranks (ringtail.New with the libp2p control plane) expect, on a free
// port of the advertised IP. It returns the listener and its host:port.
func (w *Worker) listenRendezvous() (net.Listener, string, error) {
	ip := w.cfg.advertiseIP()
	ln, err := p2p.ListenCoordinator(p2p.CoordinatorConfig{JobID: w.cfg.JobID, Secret: w.cfg.Secret, ListenIP: ip, Logger: w.log})
	if err != nil {
		return nil, "", err
	}
	a, ok := ln.Addr().(p2p.Addr)
	if !ok {
		ln.Close()
		return nil, "", fmt.Errorf("elastic: rendezvous address %v", ln.Addr())
	}
	port, err := a.Multiaddr.ValueForProtocol(ma.P_TCP)
	if err != nil {
		ln.Close()
		return nil, "", fmt.Errorf("elastic: rendezvous address %v: %w", a, err)
	}
	return ln, net.JoinHostPort(ip, port), nil
}

// adopt makes v the current view: the previous generation's context ends.
func (w *Worker) adopt(v view.View) {
	w.state.set(v)
	if w.genStop != nil {
		w.genStop(errSuperseded)
	}
	w.genCtx, w.genStop = context.WithCancelCause(w.root)
	if w.fatal != nil {
		w.genStop(w.fatal)
	}
	for g, c := range w.coords {
		if g < v.Gen {
			c()
			delete(w.coords, g)
		}
	}
	w.log.Info().Uint64("gen", v.Gen).Strs("members", v.Members).Str("proposer", v.Proposer).
		Bool("member", v.Contains(w.name)).Msg("elastic: adopted view")
	if v.Proposer == w.name {
		w.broadcast(v)
		w.resendAt = w.clock.Now().Add(w.cfg.Timers.Resend)
	}
}

func (w *Worker) broadcast(v view.View) {
	data := encode(msgProposal, v)
	for _, name := range slices.Sorted(maps.Keys(w.peers)) {
		if name != w.name {
			w.sendTo(name, data, nil)
		}
	}
}

// sendTo sends data to the live node name over memberlist's reliable
// (TCP, encrypted) channel from a helper goroutine; done, if set, receives
// the result. It reports whether name is a live node.
func (w *Worker) sendTo(name string, data []byte, done chan<- error) bool {
	addr, ok := w.peers[name]
	if !ok {
		return false
	}
	to, err := nodeAt(name, addr)
	if err != nil { // the delegate copied the address from memberlist: cannot happen
		w.log.Error().Err(err).Msg("elastic: peer address")
		return false
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		err := w.ml.SendReliable(to, data)
		if err != nil {
			w.log.Debug().Err(err).Str("to", name).Msg("elastic: send failed")
		}
		if done != nil {
			done <- err
		}
	}()
	return true
}

// nodeAt builds a memberlist.Node of this package's own (not one from
// memberlist's state) for SendReliable, which reads only the name and
// address.
func nodeAt(name, addr string) (*memberlist.Node, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("elastic: node %s at %q: %w", name, addr, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	ip := net.ParseIP(host)
	if err != nil || ip == nil {
		return nil, fmt.Errorf("elastic: node %s at %q: not an IP and port", name, addr)
	}
	return &memberlist.Node{Name: name, Addr: ip, Port: uint16(p)}, nil
}

func (w *Worker) onTick() {
	now := w.clock.Now()
	if v := w.d.View(); v.Proposer == w.name && w.d.FormedGen() < v.Gen && !now.Before(w.resendAt) && w.fatal == nil {
		w.broadcast(v)
		w.resendAt = now.Add(w.cfg.Timers.Resend)
	}
	if !w.joining && !now.Before(w.rejoinAt) && w.fatal == nil {
		w.rejoinAt = now.Add(w.cfg.Timers.Rejoin)
		known := map[string]bool{}
		for _, a := range w.peers {
			known[a] = true
		}
		if seeds := w.otherSeeds(known); len(seeds) > 0 {
			w.joining = true
			w.wg.Add(1)
			go func() {
				defer w.wg.Done()
				_, _ = w.ml.Join(seeds)
				w.post(joinedReq{})
			}()
		}
	}
}

// otherSeeds returns the seeds that are neither this node nor in known.
func (w *Worker) otherSeeds(known map[string]bool) []string {
	var out []string
	for _, s := range w.cfg.Seeds {
		if s != w.addr && !known[s] {
			out = append(out, s)
		}
	}
	return out
}

func (w *Worker) onEvent(e event) {
	now := w.clock.Now()
	switch e.kind {
	case evAlive:
		w.peers[e.name] = e.addr // observers too: they hear proposals
		if !isObserver(e.name) {
			w.d.Alive(e.name, now)
		}
	case evDead:
		delete(w.peers, e.name)
		if !isObserver(e.name) {
			w.log.Info().Str("peer", e.name).Msg("elastic: node dead or left")
			w.d.Dead(e.name, now)
		}
	case evMsg, evState:
		m, err := decode(e.data)
		if err != nil {
			w.log.Warn().Err(err).Msg("elastic: bad message")
			return
		}
		switch m := m.(type) {
		case view.View:
			if w.d.Receive(m, now) {
				w.adopt(m)
			}
		case failedMsg:
			if e.kind == evMsg {
				w.d.Evidence(m.Gen, m.Blame, now)
			}
		}
	}
}

func (w *Worker) onRequest(r any) {
	now := w.clock.Now()
	switch r := r.(type) {
	case awaitReq:
		w.waiters = append(w.waiters, r)
	case reportReq:
		w.d.Evidence(r.gen, r.blame, now)
		if v := w.d.View(); r.gen == v.Gen {
			data := encode(msgFailed, failedMsg{Gen: r.gen, From: w.name, Blame: r.blame})
			for _, m := range v.Members {
				if m != w.name && m != r.blame {
					w.sendTo(m, data, nil)
				}
			}
		}
	case formedReq:
		w.d.Formed(r.gen, now)
		for g, c := range w.coords {
			if g <= r.gen {
				c()
				delete(w.coords, g)
			}
		}
	case joinedReq:
		w.joining = false
	}
}
