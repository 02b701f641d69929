package ringtail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/ringtail-ml/ringtail/internal/exec"
	"github.com/ringtail-ml/ringtail/internal/p2p"
	"github.com/ringtail-ml/ringtail/internal/plan"
	"github.com/ringtail-ml/ringtail/internal/rendezvous"
	"github.com/ringtail-ml/ringtail/internal/transport"
	"github.com/ringtail-ml/ringtail/ring"
	"github.com/ringtail-ml/ringtail/tree"
)

// Error is the error every collective returns once the communicator has
// started: it names the failure Kind, the rank blamed (Rank) and the rank
// that detected it (Reporter). Use errors.As to inspect it.
type Error = transport.Error

// Kind classifies an *Error.
type Kind = transport.Kind

// Failure kinds.
const (
	KindPeerDied = transport.KindPeerDied
	KindSilent   = transport.KindSilent
	KindTimeout  = transport.KindTimeout
	KindMismatch = transport.KindMismatch
	KindCanceled = transport.KindCanceled
	KindProtocol = transport.KindProtocol
	KindClosed   = transport.KindClosed
	KindLocal    = transport.KindLocal
)

// RankOf returns the rank an error blames, if any.
func RankOf(err error) (int, bool) { return transport.RankOf(err) }

// ErrClosed is returned by calls on a closed communicator.
var ErrClosed = errors.New("ringtail: communicator closed")

// Collective kinds, as carried in frames.
const (
	kindAllReduce uint8 = iota + 1
	kindBroadcast
	kindAllGather
	kindReduceScatter
	kindBarrier
	kindP2P
)

var kindNames = map[uint8]string{kindAllReduce: "AllReduce", kindBroadcast: "Broadcast", kindAllGather: "AllGather", kindReduceScatter: "ReduceScatter", kindBarrier: "Barrier", kindP2P: "Send/Recv"}

func describe(d transport.Desc) string {
	s := fmt.Sprintf("%s (count=%d, %v", kindNames[d.Kind], d.Count, DType(d.DType))
	if d.RedOp != 0 {
		s += ", " + Op(d.RedOp).String()
	}
	if d.Kind == kindBroadcast {
		s += fmt.Sprintf(", root=%d", d.Root)
	}
	return s + ")"
}

// Comm is a communicator: one rank's membership in a job's mesh. Its
// collectives must be called in the same order on every rank; a Comm runs
// one collective at a time (calls from several goroutines are serialised).
// After any failure it stays failed: create a new one (new generation).
type Comm struct {
	cfg   Config
	order []int

	mu     sync.Mutex // serialises collectives; guards the fields below
	closed bool
	progs  map[progKey]*plan.Program
	last   struct { // the previous call's program: a training loop repeats one call
		key progKey
		p   *plan.Program
	}

	mesh     *transport.Mesh
	executor *exec.Executor

	coordStop context.CancelFunc
	coordDone chan struct{}

	stashMu sync.Mutex
	stash   []transport.Contribution // contributions received but not yet asked for

	closers []func() error // released after the mesh (the libp2p data-plane host)
}

type progKey struct {
	kind  uint8
	count int
	root  int
	avg   bool
	small bool // latency-optimal algorithm
	esize int
	group string // members of a subgroup call, or the peer of a point-to-point one
}

// New joins the job: it starts the rendezvous coordinator if this is rank
// 0 (unless ExternalCoordinator), registers this rank's endpoint, and
// connects to every other rank. It returns when the mesh is complete, or
// with an error when ctx or ConnectTimeout ends first.
func New(ctx context.Context, cfg Config) (*Comm, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Comm{cfg: cfg, progs: map[progKey]*plan.Program{}}
	c.order = make([]int, cfg.WorldSize)
	for i := range c.order {
		c.order[i] = i
	}
	if cfg.WorldSize == 1 {
		ex, err := exec.New(nil, cfg.ChunkBytes)
		if err != nil {
			return nil, err
		}
		c.executor = ex
		return c, nil
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()
	if err := c.connect(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Comm) connect(ctx context.Context) error {
	cfg := c.cfg
	log := cfg.Logger.With().Int("rank", cfg.Rank).Logger()
	coordAddr := net.JoinHostPort(cfg.MasterAddr, strconv.Itoa(cfg.MasterPort))
	if cfg.Rank == 0 && !cfg.ExternalCoordinator {
		if err := c.startCoordinator(coordAddr); err != nil {
			return err
		}
	}
	network := cfg.network
	ip := cfg.ListenIP
	if ip == "" {
		ip = routeIP(cfg.MasterAddr)
	}
	if network == nil && cfg.DataPlane == "libp2p" {
		n, err := p2p.NewNetwork(p2p.NetworkConfig{ListenIP: ip})
		if err != nil {
			return fmt.Errorf("ringtail: libp2p data plane: %w", err)
		}
		c.closers = append(c.closers, n.Close)
		network = n
	}
	if network == nil {
		s, err := transport.NewSockets(transport.SocketsConfig{ListenIP: ip, DisableUnix: cfg.DisableUnix})
		if err != nil {
			return fmt.Errorf("ringtail: %w", err)
		}
		network = s
	}
	ln, err := network.Listen(ctx)
	if err != nil {
		return fmt.Errorf("ringtail: %w", err)
	}
	ep, _ := json.Marshal(ln.Endpoint())
	settings := map[string]string{
		"channels": strconv.Itoa(cfg.Channels), "chunk_bytes": strconv.Itoa(cfg.ChunkBytes),
		"small_bytes": strconv.Itoa(cfg.SmallBytes), "generation": strconv.FormatUint(cfg.Generation, 10),
		"shm": strconv.FormatBool(!cfg.DisableShm),
	}
	req := rendezvous.Request{
		Addr: coordAddr, JobID: cfg.JobID, Secret: cfg.Secret, World: cfg.WorldSize,
		Group:  "generation-" + strconv.FormatUint(cfg.Generation, 10),
		Member: rendezvous.Member{Rank: cfg.Rank, Endpoint: ep, Settings: settings},
	}
	var members []rendezvous.Member
	if cfg.controlPlane() == "libp2p" {
		members, err = registerP2P(ctx, cfg, req)
	} else {
		members, err = rendezvous.Register(ctx, req)
	}
	if err != nil {
		ln.Close()
		return fmt.Errorf("ringtail: rank %d: %w", cfg.Rank, err)
	}
	eps := make([]transport.Endpoint, len(members))
	for i, m := range members {
		if err := json.Unmarshal(m.Endpoint, &eps[i]); err != nil {
			ln.Close()
			return fmt.Errorf("ringtail: rank %d's endpoint: %w", i, err)
		}
	}
	silence := cfg.PeerTimeout
	mesh, err := transport.Connect(ctx, transport.MeshConfig{
		Identity: transport.Identity{JobID: cfg.JobID, Rank: cfg.Rank, World: cfg.WorldSize, Generation: cfg.Generation, Secret: cfg.Secret},
		Channels: cfg.Channels, Network: network, Listener: ln, Endpoints: eps, Logger: log, SharedMemory: !cfg.DisableShm,
		TolerateDeaths: cfg.TolerateDeaths, FastSpin: cfg.FastSpin,
		Link: transport.LinkConfig{Silence: silence, Heartbeat: silence / 4, Chunk: cfg.ChunkBytes, Describe: describe},
	})
	if err != nil {
		return fmt.Errorf("ringtail: %w", err)
	}
	c.mesh = mesh
	if c.executor, err = exec.New(mesh, cfg.ChunkBytes); err != nil {
		return err
	}
	return c.agreeOnFastboxes(ctx)
}

// agreeOnFastboxes enables the fastbox path if every rank has fastboxes on
// all its links. A rank with one link that is not shared memory (another
// host, a failed upgrade) would run a call's exchange with a same-host peer
// over the ring while the peer waits in its fastbox; so all ranks decide
// together, with a Min over the general path.
func (c *Comm) agreeOnFastboxes(ctx context.Context) error {
	all := []int32{0}
	if c.mesh.AllFast() {
		all[0] = 1
	}
	if c.cfg.WorldSize > 1 {
		if err := c.AllReduce(ctx, Int32s(all), Min); err != nil {
			return fmt.Errorf("ringtail: rank %d: agreeing on the transport: %w", c.cfg.Rank, err)
		}
	}
	c.executor.EnableFast(all[0] == 1)
	return nil
}

func (c *Comm) startCoordinator(addr string) error {
	srv, err := rendezvous.NewServer(rendezvous.ServerConfig{JobID: c.cfg.JobID, Secret: c.cfg.Secret, World: c.cfg.WorldSize, Logger: c.cfg.Logger})
	if err != nil {
		return err
	}
	bind := addr
	loopback := false
	if ip := net.ParseIP(c.cfg.MasterAddr); ip == nil || !ip.IsLoopback() {
		bind = net.JoinHostPort("", strconv.Itoa(c.cfg.MasterPort))
	} else {
		loopback = true
	}
	var ln net.Listener
	if c.cfg.controlPlane() == "libp2p" {
		listenIP := "0.0.0.0"
		if loopback {
			listenIP = "127.0.0.1"
		}
		ln, err = p2p.ListenCoordinator(p2p.CoordinatorConfig{JobID: c.cfg.JobID, Secret: c.cfg.Secret, ListenIP: listenIP, Port: c.cfg.MasterPort})
	} else {
		ln, err = net.Listen("tcp", bind)
	}
	if err != nil {
		return fmt.Errorf("ringtail: rank 0 cannot host the rendezvous on %s: %w", bind, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.coordStop, c.coordDone = cancel, make(chan struct{})
	go func() {
		defer close(c.coordDone)
		_ = srv.Serve(ctx, ln)
	}()
	return nil
}

// routeIP returns the local IP that routes to host (no packet is sent), or
// 127.0.0.1 for loopback or when it cannot be determined.
func routeIP(host string) string {
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() || host == "localhost" {
		return "127.0.0.1"
	}
	conn, err := net.Dial("udp", net.JoinHostPort(host, "9"))
	if err != nil {
		return "127.0.0.1"
	}
	defer conn.Close()
	return conn.LocalAddr().(*net.UDPAddr).IP.String()
}

// Rank returns this rank.
func (c *Comm) Rank() int { return c.cfg.Rank }

// Dead lists the ranks known to have died or closed (only a communicator
// with TolerateDeaths keeps running after a death).
func (c *Comm) Dead() []int {
	if c.mesh == nil {
		return nil
	}
	return c.mesh.Dead()
}

// Size returns the world size.
func (c *Comm) Size() int { return c.cfg.WorldSize }

// Config returns the configuration the communicator runs with.
func (c *Comm) Config() Config { return c.cfg }

// Close leaves the job: peers are told this rank closed, and every socket
// and goroutine of the communicator is released. Safe to call twice.
func (c *Comm) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.mesh != nil {
		c.mesh.Close()
	}
	if c.coordStop != nil {
		c.coordStop()
		<-c.coordDone
	}
	for _, f := range c.closers {
		_ = f()
	}
	return nil
}

// registerP2P registers over the libp2p control plane: a dial-only host
// reaches the coordinator at the identity derived from the job secret, so
// an impostor coordinator is refused by Noise before anything is sent.
func registerP2P(ctx context.Context, cfg Config, req rendezvous.Request) ([]rendezvous.Member, error) {
	h, err := p2p.NewHost(p2p.HostConfig{DialOnly: true})
	if err != nil {
		return nil, err
	}
	defer h.Close()
	addr, err := p2p.CoordinatorAddr(cfg.MasterAddr, cfg.MasterPort, cfg.Secret, cfg.JobID)
	if err != nil {
		return nil, err
	}
	req.Addr = addr.String()
	return p2p.Register(ctx, h, req)
}

// call is one collective invocation.
type call struct {
	kind  uint8
	data  Buffer
	input Buffer
	op    Op
	root  int
	count int // the count carried in frames
}

func (c *Comm) program(k progKey, build func() (*plan.Program, error)) (*plan.Program, error) {
	if c.last.p != nil && c.last.key == k {
		return c.last.p, nil
	}
	if p, ok := c.progs[k]; ok {
		c.last.key, c.last.p = k, p
		return p, nil
	}
	p, err := build()
	if err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if len(c.progs) >= 256 {
		clear(c.progs)
	}
	c.progs[k] = p
	c.last.key, c.last.p = k, p
	return p, nil
}

// run validates a call, builds (or reuses) its program and executes it
// under the operation timeout. A locally invalid call fails the whole
// communicator, so peers get a clear error instead of waiting.
func (c *Comm) run(ctx context.Context, cl call, build func() (*plan.Program, error), key progKey) error {
	c.mu.Lock()
	err := c.runLocked(ctx, cl, build, key)
	c.mu.Unlock() // not deferred: this is the per-call path of every collective
	return err
}

func (c *Comm) runLocked(ctx context.Context, cl call, build func() (*plan.Program, error), key progKey) error {
	if c.closed {
		return ErrClosed
	}
	if c.mesh != nil {
		if err := c.mesh.Err(); err != nil {
			return err
		}
	}
	desc := transport.Desc{Kind: cl.kind, DType: uint8(cl.data.DType), RedOp: uint8(cl.op), Root: uint32(cl.root), Count: uint64(cl.count)}
	p, err := c.program(key, build)
	if err != nil {
		return c.invalid(desc, err)
	}
	ec := exec.Call{Desc: desc, DType: cl.data.DType, Op: cl.op, Data: cl.data.Bytes, Input: cl.input.Bytes}
	return c.executor.Run(ctx, c.cfg.OpTimeout, p, &ec)
}

// invalid reports a call this rank cannot make and, in a multi-rank job,
// aborts the communicator so the other ranks hear why at once.
func (c *Comm) invalid(d transport.Desc, err error) error {
	e := &Error{Kind: KindLocal, Rank: c.cfg.Rank, Reporter: c.cfg.Rank, Local: c.cfg.Rank,
		Detail: fmt.Sprintf("invalid %s: %v", describe(d), err)}
	if c.mesh != nil {
		c.mesh.Fail(e)
	}
	return e
}

func (c *Comm) check(name string, b Buffer) error {
	if !b.DType.Valid() {
		return fmt.Errorf("%s: invalid element type %v", name, b.DType)
	}
	if len(b.Bytes)%b.DType.Size() != 0 {
		return fmt.Errorf("%s: %d bytes is not a whole number of %v elements", name, len(b.Bytes), b.DType)
	}
	return nil
}

func (c *Comm) precheck(cl call, errs ...error) error {
	for _, err := range errs {
		if err != nil {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.closed {
				return ErrClosed
			}
			return c.invalid(transport.Desc{Kind: cl.kind, DType: uint8(cl.data.DType), RedOp: uint8(cl.op), Count: uint64(cl.count)}, err)
		}
	}
	return nil
}

// AllReduce reduces buf element-wise across all ranks, in place: on return
// every rank holds identical bits. Messages up to SmallBytes use recursive
// doubling; larger ones the pipelined ring (reduce-scatter + allgather).
func (c *Comm) AllReduce(ctx context.Context, buf Buffer, op Op) error {
	cl := call{kind: kindAllReduce, data: buf, op: op, count: buf.Len()}
	var opErr error
	if !op.Valid() {
		opErr = fmt.Errorf("invalid reduction op %v", op)
	}
	if err := c.check("AllReduce", buf); err != nil || opErr != nil {
		return c.precheck(cl, err, opErr)
	}
	n, avg := buf.Len(), op == Avg
	small := len(buf.Bytes) <= c.cfg.SmallBytes
	key := progKey{kind: kindAllReduce, count: n, avg: avg, small: small}
	return c.run(ctx, cl, func() (*plan.Program, error) {
		if small {
			return tree.AllReduce(c.order, c.cfg.WorldSize, c.cfg.Rank, n, avg)
		}
		return ring.AllReduce(ring.Spec{Order: c.order, Rank: c.cfg.Rank, Channels: c.cfg.Channels}, n, avg)
	}, key)
}

// Broadcast copies root's buf to every rank's buf.
func (c *Comm) Broadcast(ctx context.Context, buf Buffer, root int) error {
	cl := call{kind: kindBroadcast, data: buf, root: root, count: buf.Len()}
	var rootErr error
	if root < 0 || root >= c.cfg.WorldSize {
		rootErr = fmt.Errorf("root %d outside 0..%d", root, c.cfg.WorldSize-1)
	}
	if err := c.precheck(cl, c.check("Broadcast", buf), rootErr); err != nil {
		return err
	}
	n := buf.Len()
	small := len(buf.Bytes) <= c.cfg.SmallBytes
	chunk := max(1, c.cfg.ChunkBytes/max(1, buf.DType.Size()))
	key := progKey{kind: kindBroadcast, count: n, root: root, esize: buf.DType.Size(), small: small}
	return c.run(ctx, cl, func() (*plan.Program, error) {
		if small {
			return tree.Broadcast(c.order, c.cfg.WorldSize, c.cfg.Rank, root, n)
		}
		return ring.Broadcast(ring.Spec{Order: c.order, Rank: c.cfg.Rank, Channels: 1}, root, n, chunk)
	}, key)
}

// AllGather concatenates every rank's send buffer, in rank order, into
// recv on every rank; recv must hold WorldSize times send's elements.
func (c *Comm) AllGather(ctx context.Context, send, recv Buffer) error {
	cl := call{kind: kindAllGather, data: recv, input: send, count: send.Len()}
	var shapeErr error
	if send.DType != recv.DType {
		shapeErr = fmt.Errorf("send is %v but recv is %v", send.DType, recv.DType)
	} else if recv.Len() != send.Len()*c.cfg.WorldSize {
		shapeErr = fmt.Errorf("recv has %d elements, want %d × %d", recv.Len(), c.cfg.WorldSize, send.Len())
	}
	if err := c.precheck(cl, c.check("AllGather send", send), c.check("AllGather recv", recv), shapeErr); err != nil {
		return err
	}
	n := send.Len()
	return c.run(ctx, cl, func() (*plan.Program, error) {
		return ring.AllGather(ring.Spec{Order: c.order, Rank: c.cfg.Rank, Channels: c.cfg.Channels}, n)
	}, progKey{kind: kindAllGather, count: n})
}

// ReduceScatter reduces send (WorldSize blocks of recv's length) across
// ranks and leaves block r of the result in rank r's recv. send is not
// modified.
func (c *Comm) ReduceScatter(ctx context.Context, send, recv Buffer, op Op) error {
	cl := call{kind: kindReduceScatter, data: recv, input: send, op: op, count: recv.Len()}
	var shapeErr error
	if send.DType != recv.DType {
		shapeErr = fmt.Errorf("send is %v but recv is %v", send.DType, recv.DType)
	} else if send.Len() != recv.Len()*c.cfg.WorldSize {
		shapeErr = fmt.Errorf("send has %d elements, want %d × %d", send.Len(), c.cfg.WorldSize, recv.Len())
	}
	if !op.Valid() {
		shapeErr = errors.Join(shapeErr, fmt.Errorf("invalid reduction op %v", op))
	}
	if err := c.precheck(cl, c.check("ReduceScatter send", send), c.check("ReduceScatter recv", recv), shapeErr); err != nil {
		return err
	}
	n := recv.Len()
	return c.run(ctx, cl, func() (*plan.Program, error) {
		return ring.ReduceScatter(ring.Spec{Order: c.order, Rank: c.cfg.Rank, Channels: c.cfg.Channels}, n, op == Avg)
	}, progKey{kind: kindReduceScatter, count: n, avg: op == Avg})
}

// Barrier returns once every rank has entered it.
func (c *Comm) Barrier(ctx context.Context) error {
	buf := Buffer{Bytes: []byte{}, DType: Uint8}
	return c.run(ctx, call{kind: kindBarrier, data: buf, op: Sum}, func() (*plan.Program, error) {
		return tree.AllReduce(c.order, c.cfg.WorldSize, c.cfg.Rank, 0, false)
	}, progKey{kind: kindBarrier})
}

// DumpPlan returns, as text, the program cfg.Rank would run for an
// AllReduce of count elements of dt with op (ringtail bench --dump-plan).
func DumpPlan(cfg Config, count int, dt DType, op Op) (string, error) {
	if err := cfg.Validate(); err != nil {
		return "", err
	}
	order := make([]int, cfg.WorldSize)
	for i := range order {
		order[i] = i
	}
	var p *plan.Program
	var err error
	if count*dt.Size() <= cfg.SmallBytes {
		p, err = tree.AllReduce(order, cfg.WorldSize, cfg.Rank, count, op == Avg)
	} else {
		p, err = ring.AllReduce(ring.Spec{Order: order, Rank: cfg.Rank, Channels: cfg.Channels}, count, op == Avg)
	}
	if err != nil {
		return "", err
	}
	return p.String(), nil
}

// Sleep waits for d or until ctx ends, whichever is first; a helper for
// jobs padding compute without a goroutine leak.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
