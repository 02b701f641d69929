package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/ringtail-ml/ringtail/internal/algo"
	"github.com/ringtail-ml/ringtail/internal/envcfg"
	"github.com/ringtail-ml/ringtail/internal/exec"
	"github.com/ringtail-ml/ringtail/internal/flight"
	"github.com/ringtail-ml/ringtail/internal/p2p"
	"github.com/ringtail-ml/ringtail/internal/plan"
	"github.com/ringtail-ml/ringtail/internal/reduce"
	"github.com/ringtail-ml/ringtail/internal/rendezvous"
	"github.com/ringtail-ml/ringtail/internal/route"
	"github.com/ringtail-ml/ringtail/internal/transport"
	"github.com/ringtail-ml/ringtail/internal/wire"
	"github.com/ringtail-ml/ringtail/topology"
)

// Settings are what the engine needs: the communicator's configuration
// (envcfg.Comm, validated, its ControlPlane resolved to "libp2p" or
// "tcp") and what the assembly (internal/assemble) adds to it.
type Settings struct {
	envcfg.Comm
	// Tracer observes every call (internal/obs); nil: none. The executor
	// reports phases to it only when TracePhases.
	Tracer      exec.Tracer
	TracePhases bool
	// Network replaces the sockets (tests: an in-memory network).
	Network transport.Network
	// Flight records every call (internal/flight); nil: none. The engine
	// dumps it when the communicator fails, and stops it on Close.
	Flight *flight.Recorder
}

// DefaultStreams is the number of connections per pair of ranks on
// different hosts when Settings.Streams is 0: where a stream is limited by
// its window (a long round trip), 8 of them carried 8× one on the test
// bed's added-delay links (docs/benchmarks-hosts.md); the probe decides whether
// a program uses them.
const DefaultStreams = 8

// ErrClosed is returned by calls on a closed engine.
var ErrClosed = errors.New("ringtail: communicator closed")

// Names renders element types and operators in error messages.
var names = wire.Names{
	DType: func(d uint8) string { return reduce.DType(d).String() },
	RedOp: func(o uint8) string { return reduce.Op(o).String() },
}

// Names returns how the engine renders element types and operators (the
// flight recorder's dumps use it too).
func Names() wire.Names { return names }

// Engine is one rank's membership in a job's mesh and everything that runs
// calls on it.
type Engine struct {
	s Settings

	mu     sync.Mutex // serialises calls; guards the fields below
	closed bool
	progs  map[progKey]*plan.Program
	last   struct { // the previous call's program: a training loop repeats one call
		key progKey
		p   *plan.Program
	}
	plain struct { // the previous world call's program, found without building a progKey
		key plainKey
		p   *plan.Program
	}
	world  group             // calls of every rank
	groups map[uint32]*group // calls of subgroups and point-to-point pairs
	doneFn func(uint32) uint64

	mesh     *transport.Mesh
	executor *exec.Executor
	// planner decides how every call runs (algo.Planner): built from
	// the settings at New, then from what every rank agreed about the
	// transport (agreeOnTransport). tuneBuf and tuneCall are its
	// agreements'; announced is what --log-level info last said ran, by
	// collective and size class (announce).
	planner   *algo.Planner
	tun       algo.Tunables // the builders' settings (Settings.Tunables; Order set by connect)
	forced    algo.Kind     // the program Settings.Algorithm forces (0: auto)
	streams   int           // connections per pair of ranks (Settings.Streams)
	tuneBuf   [8]byte
	tuneCall  Call
	announced map[announceKey]string

	coordStop context.CancelFunc
	coordDone chan struct{}

	box mailbox

	closers []func() error // released after the mesh (the libp2p data-plane host)
}

// newEngine is an engine of s that has joined nothing yet.
func newEngine(s Settings) *Engine {
	program, _ := algo.ParseKind(s.Algorithm) // validated
	return &Engine{s: s, tun: s.Tunables(), forced: program, progs: map[progKey]*plan.Program{}, groups: map[uint32]*group{}}
}

// New joins the job: it starts the rendezvous coordinator if this is rank
// 0 (unless ExternalCoordinator), registers this rank's endpoint, connects
// to every other rank and agrees on the transport. It returns when the
// mesh is complete, or with an error when ctx or ConnectTimeout ends first.
func New(ctx context.Context, s Settings) (*Engine, error) {
	e := newEngine(s)
	e.doneFn = e.groupDone
	var err error
	if e.planner, err = algo.NewPlanner(e.plannerConfig(), algo.Facts{World: s.WorldSize}); err != nil {
		return nil, fmt.Errorf("ringtail: %w", err)
	}
	if s.Flight != nil {
		s.Flight.SetCallLock(&e.mu)
	}
	if s.WorldSize == 1 {
		ex, err := exec.New(nil, e.tun.ChunkBytes)
		if err != nil {
			return nil, err
		}
		e.executor = ex
		e.traceExecutor()
		e.watchFlight()
		return e, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.ConnectTimeout)
	defer cancel()
	if err := e.connect(ctx); err != nil {
		e.Close()
		return nil, err
	}
	e.watchFlight()
	return e, nil
}

func (e *Engine) connect(ctx context.Context) error {
	s := e.s
	log := s.Logger.With().Int("rank", s.Rank).Logger()
	coordAddr := net.JoinHostPort(s.MasterAddr, strconv.Itoa(s.MasterPort))
	if s.Rank == 0 && !s.ExternalCoordinator {
		if err := e.startCoordinator(); err != nil {
			return err
		}
	}
	network := s.Network
	ip := s.ListenIP
	if ip == "" {
		var err error
		if ip, err = routeIP(ctx, s.MasterAddr); err != nil {
			return fmt.Errorf("ringtail: rank %d: %w", s.Rank, err)
		}
	}
	if network == nil && s.DataPlane == "libp2p" {
		n, err := p2p.NewNetwork(p2p.NetworkConfig{ListenIP: ip})
		if err != nil {
			return fmt.Errorf("ringtail: libp2p data plane: %w", err)
		}
		e.closers = append(e.closers, n.Close)
		network = n
	}
	if network == nil {
		sk, err := transport.NewSockets(transport.SocketsConfig{ListenIP: ip, DisableUnix: s.DisableUnix})
		if err != nil {
			return fmt.Errorf("ringtail: %w", err)
		}
		network = sk
	}
	ln, err := network.Listen(ctx)
	if err != nil {
		return fmt.Errorf("ringtail: %w", err)
	}
	cpu := boundCPU()
	ep, _ := json.Marshal(advertised{Endpoint: ln.Endpoint(), CPU: &cpu})
	settings := map[string]string{
		"channels": strconv.Itoa(e.tun.Channels), "chunk_bytes": strconv.Itoa(e.tun.ChunkBytes),
		"small_bytes": strconv.Itoa(e.tun.SmallBytes), "piece_bytes": strconv.Itoa(e.tun.PieceBytes), "pieces": s.Pieces,
		"program": e.forced.String(), "streams": strconv.Itoa(s.Streams), "generation": strconv.FormatUint(s.Generation, 10),
		"shm": strconv.FormatBool(!s.DisableShm), "host_ring_order": strconv.FormatBool(s.HostRingOrder()),
		"debug_detail": strconv.FormatBool(s.Detail()),
	}
	req := rendezvous.Request{
		Addr: coordAddr, JobID: s.JobID, Secret: s.Secret, World: s.WorldSize,
		Group:  "generation-" + strconv.FormatUint(s.Generation, 10),
		Member: rendezvous.Member{Rank: s.Rank, Endpoint: ep, Settings: settings},
	}
	var members []rendezvous.Member
	if s.ControlPlane == "libp2p" {
		members, err = registerP2P(ctx, s, req)
	} else {
		members, err = rendezvous.Register(ctx, req)
	}
	if err != nil {
		ln.Close()
		return fmt.Errorf("ringtail: rank %d: %w", s.Rank, err)
	}
	eps := make([]transport.Endpoint, len(members))
	cpus := make([]int, len(members))
	for i, m := range members {
		var a advertised
		if err := json.Unmarshal(m.Endpoint, &a); err != nil {
			ln.Close()
			return fmt.Errorf("ringtail: rank %d's endpoint: %w", i, err)
		}
		eps[i], cpus[i] = a.Endpoint, -1
		if a.CPU != nil {
			cpus[i] = *a.CPU
		}
	}
	if s.HostRingOrder() {
		e.tun.Order = hostRingOrder(eps)
	}
	silence := s.PeerTimeout
	e.streams = e.tun.Channels
	if hostIndex(eps) != nil {
		e.streams = max(e.streams, cmp.Or(s.Streams, DefaultStreams))
	}
	mesh, err := transport.Connect(ctx, transport.MeshConfig{
		Identity: transport.Identity{JobID: s.JobID, Rank: s.Rank, World: s.WorldSize, Generation: s.Generation, Secret: s.Secret, Frames: s.Frames()},
		Channels: e.streams, Network: network, Listener: ln, Endpoints: eps, Logger: log, SharedMemory: !s.DisableShm,
		TolerateDeaths: s.TolerateDeaths, FastSpin: s.FastSpin, State: e.idleState,
		Link: transport.LinkConfig{Silence: silence, Heartbeat: silence / 8, Chunk: e.tun.ChunkBytes, Names: names},
	})
	if err != nil {
		return fmt.Errorf("ringtail: %w", err)
	}
	e.mesh = mesh
	e.box.init(mesh)
	if e.executor, err = exec.New(mesh, e.tun.ChunkBytes); err != nil {
		return err
	}
	e.executor.SetMailbox(mailboxOf{e})
	e.traceExecutor()
	if s.Flight != nil {
		e.executor.SetWaitHook(s.Flight.Waiting)
	}
	return e.agreeOnTransport(ctx, eps, cpus)
}

// advertised is what a rank tells the others at the rendezvous: where to
// reach it, and the CPU it is bound to (−1: none), for the allreduce of
// ranks grouped by CPU.
type advertised struct {
	transport.Endpoint
	CPU *int `json:"cpu,omitempty"`
}

// hostRingOrder returns the ring that keeps each host's ranks adjacent
// (every rank computes it from the same endpoints, so all agree), or nil
// when that is rank order.
func hostRingOrder(eps []transport.Endpoint) []int {
	ranks := make([]topology.Rank, len(eps))
	for i, ep := range eps {
		ranks[i] = topology.Rank{ID: i, Host: ep.Host}
	}
	order := topology.RingOrder(ranks, nil)
	for i, r := range order {
		if i != r {
			return order
		}
	}
	return nil
}

// agreeOnTransport gives the decision point the facts every rank agrees
// on: the hosts and the CPUs the ranks are bound to (from what every rank
// advertised at the rendezvous, which every rank holds) and whether every
// rank has fastboxes on all its links. A rank with one link that is not
// shared memory (another host, a failed upgrade) would run a call's
// exchange with a same-host peer over the ring while the peer waits in
// its fastbox; so all ranks decide together, with a Min over the general
// path.
func (e *Engine) agreeOnTransport(ctx context.Context, eps []transport.Endpoint, cpus []int) error {
	all := make([]byte, 4) // one int32, native order
	if e.mesh.AllFast() {
		all[0] = 1
	}
	c := &Call{Spec: algo.Spec{Collective: wire.AllReduce, Count: 1, ElemSize: 4}, DType: reduce.Int32, Op: reduce.Min, Data: all,
		Purpose: "agreeing on the transport"}
	if err := e.Run(ctx, c); err != nil {
		return fmt.Errorf("ringtail: rank %d: agreeing on the transport: %w", e.s.Rank, err)
	}
	f := algo.Facts{World: e.s.WorldSize, Fast: all[0] == 1, FastboxBytes: transport.FastboxPayload, Host: hostIndex(eps), CPU: cpus,
		Streams: e.streams}
	p, err := algo.NewPlanner(e.plannerConfig(), f)
	if err != nil {
		return fmt.Errorf("ringtail: %w", err)
	}
	if err := p.CheckProgram(); err != nil {
		return fmt.Errorf("ringtail: rank %d: RINGTAIL_ALGORITHM (Config.Algorithm): %w", e.s.Rank, err)
	}
	e.mu.Lock()
	e.planner = p
	clear(e.progs)
	e.last.p, e.plain.p = nil, nil
	e.mu.Unlock()
	return nil
}

// plannerConfig is what the settings say about the choice of programs.
func (e *Engine) plannerConfig() algo.Config {
	return algo.Config{Tunables: e.tun, Pieces: e.s.Pieces, Program: e.forced}
}

// hostIndex numbers the endpoints' hosts in order of their first rank, or
// returns nil when every rank is on one host.
func hostIndex(eps []transport.Endpoint) []int {
	index := map[string]int{}
	host := make([]int, len(eps))
	for r, ep := range eps {
		h, ok := index[ep.Host]
		if !ok {
			h = len(index)
			index[ep.Host] = h
		}
		host[r] = h
	}
	if len(index) < 2 {
		return nil
	}
	return host
}

func (e *Engine) startCoordinator() error {
	s := e.s
	srv, err := rendezvous.NewServer(rendezvous.ServerConfig{JobID: s.JobID, Secret: s.Secret, World: s.WorldSize, Logger: s.Logger})
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(s.MasterAddr, strconv.Itoa(s.MasterPort))
	bind := addr
	loopback := false
	if ip := net.ParseIP(s.MasterAddr); ip == nil || !ip.IsLoopback() {
		bind = net.JoinHostPort("", strconv.Itoa(s.MasterPort))
	} else {
		loopback = true
	}
	var ln net.Listener
	if s.ControlPlane == "libp2p" {
		listenIP := "0.0.0.0"
		if loopback {
			listenIP = "127.0.0.1"
		}
		ln, err = p2p.ListenCoordinator(p2p.CoordinatorConfig{JobID: s.JobID, Secret: s.Secret, ListenIP: listenIP, Port: s.MasterPort, Logger: s.Logger})
	} else {
		ln, err = net.Listen("tcp", bind)
	}
	if err != nil {
		return fmt.Errorf("ringtail: rank 0 cannot host the rendezvous on %s: %w", bind, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.coordStop, e.coordDone = cancel, make(chan struct{})
	go func() {
		defer close(e.coordDone)
		_ = srv.Serve(ctx, ln)
	}()
	return nil
}

// routeIP returns the local IP that routes to host (no packet is sent),
// or 127.0.0.1 for loopback. A host that does not resolve yet (a
// Kubernetes pod's DNS name before its Service lists it) is retried until
// ctx ends: advertising loopback instead would give the other ranks an
// address they cannot reach.
func routeIP(ctx context.Context, host string) (string, error) {
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() || host == "localhost" {
		return "127.0.0.1", nil
	}
	wait := 100 * time.Millisecond
	for {
		ip, err := route.LocalIP(ctx, host)
		if err == nil {
			return ip.String(), nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", fmt.Errorf("no route to the rendezvous host %q (MASTER_ADDR) to choose a listen address (set RINGTAIL_LISTEN_IP): %w", host, err)
		case <-t.C:
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// registerP2P registers over the libp2p control plane: a dial-only host
// reaches the coordinator at the identity derived from the job secret, so
// an impostor coordinator is refused by Noise before anything is sent.
func registerP2P(ctx context.Context, s Settings, req rendezvous.Request) ([]rendezvous.Member, error) {
	h, err := p2p.NewHost(p2p.HostConfig{DialOnly: true})
	if err != nil {
		return nil, err
	}
	defer h.Close()
	addr, err := p2p.CoordinatorAddr(s.MasterAddr, s.MasterPort, s.Secret, s.JobID)
	if err != nil {
		return nil, err
	}
	req.Addr = addr.String()
	return p2p.Register(ctx, h, req)
}

// Rank returns this rank.
func (e *Engine) Rank() int { return e.s.Rank }

// Size returns the world size.
func (e *Engine) Size() int { return e.s.WorldSize }

// Settings returns the settings the engine runs with.
func (e *Engine) Settings() Settings { return e.s }

// Dead lists the ranks known to have died or closed.
func (e *Engine) Dead() []int {
	if e.mesh == nil {
		return nil
	}
	return e.mesh.Dead()
}

// Left lists the peers known to have closed their communicator cleanly
// (a subset of Dead).
func (e *Engine) Left() []int {
	if e.mesh == nil {
		return nil
	}
	return e.mesh.Left()
}

// Close leaves the job: peers are told this rank closed, and every socket
// and goroutine is released. Safe to call twice.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	if e.mesh != nil {
		e.mesh.Close()
	}
	if e.coordStop != nil {
		e.coordStop()
		<-e.coordDone
	}
	for _, f := range e.closers {
		_ = f()
	}
	e.mu.Unlock()
	// After the lock: the recorder's goroutine may be dumping a failure
	// and need it.
	if e.s.Flight != nil {
		e.s.Flight.Close()
	}
	return nil
}
