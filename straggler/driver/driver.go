package driver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
	"unsafe"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/straggler"
	"github.com/ringtail-ml/ringtail/topology"
)

// Comm is the part of a ringtail communicator the Driver uses;
// *ringtail.Comm implements it.
type Comm interface {
	Rank() int
	Size() int
	AllReduce(ctx context.Context, buf ringtail.Buffer, op ringtail.Op) error
	AllReduceAmong(ctx context.Context, buf ringtail.Buffer, op ringtail.Op, members []int) error
	AllReduceTree(ctx context.Context, buf ringtail.Buffer, t ringtail.Tree) (int, error)
	Contribute(ctx context.Context, peer int, buf ringtail.Buffer, tag uint32) error
	ContributeAsync(ctx context.Context, peer int, buf ringtail.Buffer, tag uint32) (*ringtail.Posting, error)
	TakeContributionMatching(ctx context.Context, from int, tag, mask uint32) (*ringtail.Contribution, error)
	TryContribution(from int, tag, mask uint32) (*ringtail.Contribution, bool)
	NextContributionMatching(ctx context.Context, from []int, tag, mask uint32) (*ringtail.Contribution, error)
	Probe(ctx context.Context, cfg ringtail.ProbeConfig) (topology.LinkEstimates, error)
}

var _ Comm = (*ringtail.Comm)(nil)

// lateReducer is a Comm with the exact mode's collective (AllReduceLate):
// the others reduce-scatter while the late rank is still computing.
type lateReducer interface {
	AllReduceLate(ctx context.Context, buf ringtail.Buffer, op ringtail.Op, late int) error
}

// ErrInvalidConfig is wrapped by configuration and argument errors.
var ErrInvalidConfig = errors.New("driver: invalid config")

// DefaultOpTimeout bounds every wait of a step that is not a policy wait:
// for a child's gradient the staleness bound requires, for parameters.
const DefaultOpTimeout = 5 * time.Minute

// Config configures a Driver.
type Config struct {
	// Comm connects the rank to the job; required.
	Comm Comm
	// Payload is the number of float32 elements the caller reduces each
	// step (gradient sums, a loss sum …); ≥ 0.
	Payload int
	// Gradient is how many of the payload's first elements are the
	// gradient sum (the rest — a loss sum — is not): their norms estimate
	// the gradient noise scale the policy prices modes with. Default: the
	// whole payload.
	Gradient int
	// Policy configures the decisions; World defaults to Comm.Size().
	Policy straggler.Config
	// Probe measures the links between ranks when the Driver starts (a
	// collective: every rank), so that the policy predicts any ring's
	// reduction time and sees a rank behind a slow link.
	Probe bool
	// Telemetry, when set, is read once per step for the rank's report:
	// host CPU and GPU utilisation in [0, 1], GPU SM clock in MHz (0: no
	// device); the policy's predictor regresses on them.
	Telemetry func() (cpu, gpu, smClockMHz float64)
	// OpTimeout bounds waits for gradients and parameters (default
	// DefaultOpTimeout). The Comm's own OpTimeout bounds its collectives.
	OpTimeout time.Duration
	// Logger receives one debug event per decision (info when the mode
	// changes); the zero value discards them.
	Logger zerolog.Logger
}

// StepInput is what the caller reports about its compute of a step.
type StepInput struct {
	// Samples is the number of samples whose gradients the payload sums.
	Samples int
	// Compute is the time spent computing them: under a budget, the time
	// at which the last whole sample was done.
	Compute time.Duration
	// Arrival is the time from the step's start (when the previous Step
	// returned) to this call.
	Arrival time.Duration
	// Cut says the plan's budget ended the compute before the share was
	// done.
	Cut bool
}

// Result is what a Step did.
type Result struct {
	// Step is the member step executed (for a child: the step of the
	// parameters its gradient was computed on).
	Step int
	// Role is this rank's role in it.
	Role straggler.Role
	// Applied is the number of samples whose gradients the payload now
	// sums (members' and the children's gradients folded); 0 for a child,
	// which applies nothing: its parameters come from its parent.
	Applied int
	// Folded is the number of child gradients this step folded, and
	// Staleness their mean staleness in steps.
	Folded    int
	Staleness float64
	// StateReplaced says a child's state (parameters …) was replaced by
	// fresher ones from its parent: compute the next gradient on them.
	StateReplaced bool
	// Done says training is over for a child: its parent sent the final
	// state. Call Flush next.
	Done bool
	// Wait is the time from the call to the result.
	Wait time.Duration
	// Plan is the plan executed; Next the plan of the next step.
	Plan, Next straggler.Plan
	// Report is the decoded report the next plan was decided from.
	Report straggler.Report
	// Wire says, for a child, whether its gradient went compressed and
	// what compression has saved so far (compression.go).
	Wire WireStats
}

// Tags of the driver's eager messages: the kind in the low three bits, a
// step or version above (its low 29 bits: a tag names a message among the
// few on their way, the version itself travels in the state header).
const (
	kindGradient uint32 = 0 // a child's gradient, up to its parent
	kindState    uint32 = 1 // parameters (and optimizer state), down to a child
	kindReport   uint32 = 2 // a step's report, down to a child
	kindMarker   uint32 = 3 // a child's last gradient before it rejoins or ends
	kindReassign uint32 = 4 // in-step reassignment's messages (reassign.go)
	kindMask     uint32 = 7
	kindBits            = 3
)

func tag(kind uint32, n int) uint32 { return uint32(n)<<kindBits&ringtail.MaxContributionTag | kind }

// Driver is the I/O loop of one rank's straggler.Node: call Step once per
// iteration after filling Buffer with the gradient sum. The Node says what
// the step does (the collective, the states to post, the gradients to
// drain; for a child, its gradient's post and whether to wait for
// parameters) and the Driver does it on the communicator, feeding back
// what came. It is owned by the calling goroutine, and every blocking wait
// is bounded by the caller's context and OpTimeout.
type Driver struct {
	cfg    Config
	comm   Comm
	rank   int
	world  int
	layout straggler.Layout
	buf    []float32
	node   *straggler.Node
	pol    straggler.Config
	wait   time.Duration // time in the previous reduction
	log    zerolog.Logger

	state  [][]float32 // the caller's state parts (SetState): part 0 the parameters
	stateN int         // header + every part, in float32s

	// Messages on their way, none of which may hold up a step: a parent's
	// state posts (one buffer per child: a newer state waits until the
	// previous one is sent, so a slow link gets the newest it can take),
	// its report posts, a child's gradients (two buffers, alternately).
	stateOut map[int]*outgoing
	reports  []*ringtail.Posting
	gradOut  [2]outgoing
	gradNext int

	lastPost time.Time // a child's previous gradient post
	lastFull bool      // every rank was a member of the last step's plain reduction (CanReassign)
	gradWire gradientWire
}

// outgoing is a buffer and the posting that may still be reading it.
type outgoing struct {
	buf  []float32
	post *ringtail.Posting
}

// free reports whether the buffer may be refilled.
func (o *outgoing) free() bool { return o.post == nil || o.post.Done() }

// New validates cfg and returns a Driver whose first step runs the plain
// ring with equal shares. With cfg.Probe, every rank must call New at the
// same point (the probe is a collective).
func New(ctx context.Context, cfg Config) (*Driver, error) {
	if cfg.Comm == nil {
		return nil, fmt.Errorf("driver: no communicator: %w", ErrInvalidConfig)
	}
	if cfg.Payload < 0 {
		return nil, fmt.Errorf("driver: payload %d must be ≥ 0: %w", cfg.Payload, ErrInvalidConfig)
	}
	if cfg.Gradient == 0 {
		cfg.Gradient = cfg.Payload
	}
	if cfg.Gradient < 0 || cfg.Gradient > cfg.Payload {
		return nil, fmt.Errorf("driver: gradient of %d elements in a payload of %d: %w", cfg.Gradient, cfg.Payload, ErrInvalidConfig)
	}
	if cfg.OpTimeout == 0 {
		cfg.OpTimeout = DefaultOpTimeout
	}
	if cfg.OpTimeout < 0 {
		return nil, fmt.Errorf("driver: op timeout %v must be > 0: %w", cfg.OpTimeout, ErrInvalidConfig)
	}
	world, rank := cfg.Comm.Size(), cfg.Comm.Rank()
	if cfg.Policy.World == 0 {
		cfg.Policy.World = world
	}
	if cfg.Policy.World != world {
		return nil, fmt.Errorf("driver: policy for %d ranks, communicator of %d: %w", cfg.Policy.World, world, ErrInvalidConfig)
	}
	l := straggler.Layout{Payload: cfg.Payload, World: world}
	if cfg.Policy.GradBytes == 0 {
		cfg.Policy.GradBytes = 4 * l.Len()
	}
	if cfg.Probe && world > 1 {
		est, err := cfg.Comm.Probe(ctx, ringtail.ProbeConfig{})
		if err != nil {
			return nil, fmt.Errorf("driver: rank %d: probing links: %w", rank, err)
		}
		cfg.Policy.Bandwidth = est.Bandwidth
	}
	pol, err := straggler.NewPolicy(cfg.Policy)
	if err != nil {
		return nil, err
	}
	node, err := straggler.NewNode(rank, pol)
	if err != nil {
		return nil, err
	}
	return &Driver{cfg: cfg, comm: cfg.Comm, lastFull: true, rank: rank, world: world, layout: l, buf: make([]float32, l.Len()),
		node: node, pol: pol.Config(), stateN: stateHeader, stateOut: map[int]*outgoing{},
		log: cfg.Logger.With().Int("rank", rank).Logger()}, nil
}

// Buffer returns the payload: fill it with the iteration's gradient sum
// before Step; after a member's Step it holds the sum over the Result's
// Applied samples.
func (d *Driver) Buffer() []float32 { return d.buf[:d.layout.Payload] }

// Layout returns the buffer layout.
func (d *Driver) Layout() straggler.Layout { return d.layout }

// SetState registers the caller's training state, parameters first (then
// optimizer state, …): a child gets fresh parameters from its parent, and
// the whole state when it rejoins the ring or training ends.
func (d *Driver) SetState(parts ...[]float32) {
	d.state = parts
	d.stateN = stateHeader
	for _, p := range parts {
		d.stateN += len(p)
	}
}

// Plan returns the plan of the next member step.
func (d *Driver) Plan() straggler.Plan { return d.node.Plan() }

// Role returns this rank's role in its next Step.
func (d *Driver) Role() straggler.Role { return d.node.Role() }

// Next returns the step whose batch the next iteration computes: a
// member's next step, or the step of the parameters a child holds.
func (d *Driver) Next() int { return d.node.Next() }

// Share returns rank's samples per iteration under the current plan.
func (d *Driver) Share(rank int) int { return d.node.Plan().Shares[rank] }

// Policy returns the configuration of the driver's policy.
func (d *Driver) Policy() straggler.Config { return d.pol }

// Step hands in one iteration's gradient (in Buffer). A member reduces it
// under the current plan and decides the next; a child sends it to its
// parent and takes whatever the parent sent meanwhile. On error the
// communicator may have failed (see ringtail.Error); the Driver is not
// usable after one.
func (d *Driver) Step(ctx context.Context, in StepInput) (Result, error) {
	if in.Samples < 0 || in.Compute < 0 || in.Arrival < 0 {
		return Result{}, fmt.Errorf("driver: rank %d: negative samples, compute or arrival in %+v: %w", d.rank, in, ErrInvalidConfig)
	}
	if d.node.Done() {
		return Result{Done: true}, fmt.Errorf("driver: rank %d: training is over: %w", d.rank, ErrInvalidConfig)
	}
	opCtx, cancel := context.WithTimeout(ctx, d.cfg.OpTimeout)
	defer cancel()
	rd := d.node.Ready()
	d.lastFull = rd.Role == straggler.RoleMember && d.full(rd.Plan)
	if rd.Role == straggler.RoleChild {
		return d.childStep(opCtx, rd, in)
	}
	return d.memberStep(opCtx, rd, in)
}

// telemetry reads the rank's CPU, GPU and clock for its report.
func (d *Driver) telemetry(rr *straggler.RankReport) {
	if d.cfg.Telemetry != nil {
		rr.CPU, rr.GPU, rr.SMClockMHz = d.cfg.Telemetry()
	}
}

// memberStep does a member's Ready: states down, rejoined ranks' last
// gradients folded, the reduction; then the Node decides the next plan
// and the step's report goes to this rank's children.
func (d *Driver) memberStep(ctx context.Context, rd straggler.Ready, in StepInput) (Result, error) {
	start := time.Now()
	p := rd.Plan
	res := Result{Step: p.Step, Plan: p, Role: rd.Role}
	unsent, err := d.postStates(ctx, rd.States)
	if err != nil {
		return res, err
	}
	d.log.Trace().Int("step", p.Step).Str("mode", p.Mode.String()).Ints("members", p.Members).Interface("parents", p.Parents).Ints("drain", rd.Drain).Msg("driver: member step")
	d.layout.Clear(d.buf)
	rr := straggler.RankReport{Present: true, Samples: in.Samples, Compute: in.Compute, Arrival: in.Arrival, Cut: in.Cut, Wait: d.wait,
		GradSq: straggler.SquaredNorm(d.buf[:d.cfg.Gradient])}
	d.telemetry(&rr)
	d.layout.WriteMember(d.buf, d.rank, rr)
	if err := d.drain(ctx, p.Step, rd.Drain); err != nil {
		return res, err
	}
	if err := d.reduce(ctx, rd.Call, start.Add(-in.Arrival)); err != nil {
		return res, fmt.Errorf("driver: rank %d step %d: %s reduction among %d ranks: %w", d.rank, p.Step, p.Mode, len(p.Members), err)
	}
	d.wait = time.Since(start)
	res.Wait = d.wait
	d.layout.WriteSum(d.buf, straggler.SquaredNorm(d.buf[:d.cfg.Gradient]))
	rep, err := d.layout.Read(d.buf, p.Step)
	if err != nil {
		return res, err
	}
	res.Report, res.Applied = rep, rep.Applied
	mr, err := d.node.AdvanceMember(straggler.MemberOutcome{Report: rep, Unsent: unsent})
	if err != nil {
		return res, fmt.Errorf("driver: %w", err)
	}
	res.Folded, res.Staleness = rep.Folded()
	// The children of this step hear its report (their policies replay it).
	d.reapReports()
	for _, c := range mr.Forward {
		post, err := d.comm.ContributeAsync(ctx, c, ringtail.Float32s(slices.Clone(d.buf[d.layout.Payload:])), tag(kindReport, p.Step))
		if err != nil {
			return res, fmt.Errorf("driver: rank %d: report of step %d to rank %d: %w", d.rank, p.Step, c, err)
		}
		d.reports = append(d.reports, post)
	}
	res.Next = mr.Next
	d.logDecision(res)
	d.record(res, start.Add(-in.Arrival))
	return res, nil
}

// reduce makes a member step's collective.
func (d *Driver) reduce(ctx context.Context, c straggler.Call, stepStart time.Time) error {
	buf := ringtail.Float32s(d.buf)
	switch c.Kind {
	case straggler.CallTree:
		edges := make([]ringtail.TreeEdge, len(c.Edges))
		for i, e := range c.Edges {
			edges[i] = ringtail.TreeEdge{Child: e.Child, Parent: e.Parent, Must: e.Must}
		}
		_, err := d.comm.AllReduceTree(ctx, buf, ringtail.Tree{Members: c.Members, Edges: edges,
			Deadline: stepStart.Add(c.WaitUntil), Tag: kindGradient, TagMask: kindMask})
		return err
	case straggler.CallLate:
		if lr, ok := d.comm.(lateReducer); ok {
			return lr.AllReduceLate(ctx, buf, ringtail.Sum, c.Late)
		}
		return d.comm.AllReduce(ctx, buf, ringtail.Sum)
	case straggler.CallAmong:
		return d.comm.AllReduceAmong(ctx, buf, ringtail.Sum, c.Members)
	}
	return d.comm.AllReduce(ctx, buf, ringtail.Sum)
}

// post sends an eager message to peer.
func (d *Driver) post(ctx context.Context, peer int, data []float32, t uint32) error {
	d.log.Trace().Int("to", peer).Uint32("kind", t&kindMask).Uint32("n", t>>kindBits).Int("len", len(data)).Msg("driver: post")
	if err := d.comm.Contribute(ctx, peer, ringtail.Float32s(data), t); err != nil {
		return fmt.Errorf("driver: rank %d: message %d/%d to rank %d: %w", d.rank, t&kindMask, t>>kindBits, peer, err)
	}
	return nil
}

// reapReports forgets the report posts that have been sent.
func (d *Driver) reapReports() {
	d.reports = slices.DeleteFunc(d.reports, func(p *ringtail.Posting) bool { return p.Done() })
}

// postStates sends the states the Node asks for, none of them waiting for
// a slow link unless it must (StatePost.Wait): it returns the children
// whose state was skipped because the previous one is still on its way.
func (d *Driver) postStates(ctx context.Context, posts []straggler.StatePost) ([]int, error) {
	var busy []int
	for _, sp := range posts {
		o := d.stateOut[sp.To]
		if o == nil {
			o = &outgoing{buf: make([]float32, d.stateN)}
			d.stateOut[sp.To] = o
		}
		if !o.free() {
			if !sp.Wait {
				busy = append(busy, sp.To)
				continue
			}
			if err := o.post.Wait(ctx); err != nil {
				return nil, fmt.Errorf("driver: rank %d: state to rank %d: %w", d.rank, sp.To, err)
			}
		}
		data := d.stage(o.buf, sp.Version, sp.Flags)
		d.log.Trace().Int("to", sp.To).Int("version", sp.Version).Int("flags", int(sp.Flags)).Int("len", len(data)).Msg("driver: post state")
		post, err := d.comm.ContributeAsync(ctx, sp.To, ringtail.Float32s(data), tag(kindState, sp.Version))
		if err != nil {
			return nil, fmt.Errorf("driver: rank %d: state to rank %d: %w", d.rank, sp.To, err)
		}
		o.post = post
	}
	return busy, nil
}

// settle waits until every message this rank posted is sent.
func (d *Driver) settle(ctx context.Context) error {
	for c, o := range d.stateOut {
		if o.post != nil {
			if err := o.post.Wait(ctx); err != nil {
				return fmt.Errorf("driver: rank %d: state to rank %d: %w", d.rank, c, err)
			}
		}
	}
	for _, p := range d.reports {
		if err := p.Wait(ctx); err != nil {
			return fmt.Errorf("driver: rank %d: report: %w", d.rank, err)
		}
	}
	d.reports = d.reports[:0]
	for i := range d.gradOut {
		if o := &d.gradOut[i]; o.post != nil {
			if err := o.post.Wait(ctx); err != nil {
				return fmt.Errorf("driver: rank %d: gradient to rank %d: %w", d.rank, d.node.Parent(), err)
			}
		}
	}
	return nil
}

// stage fills b with a state message: the header, then the parameters
// (and, with StateFull, every other part).
func (d *Driver) stage(b []float32, version int, flags straggler.StateFlags) []float32 {
	putStateHeader(b, version, flags)
	off := stateHeader
	for i, part := range d.state {
		if i > 0 && flags&straggler.StateFull == 0 {
			break
		}
		off += copy(b[off:], part)
	}
	return b[:off]
}

// drain folds, before step's reduction, the gradients the ranks that
// have just rejoined sent as this rank's children: every one up to its
// marker (the link delivers them in order), so none is lost or folded
// twice.
func (d *Driver) drain(ctx context.Context, step int, ranks []int) error {
	for _, r := range ranks {
		for {
			c, err := d.comm.TakeContributionMatching(ctx, r, 0, 0)
			if err != nil {
				return fmt.Errorf("driver: rank %d step %d: gradients of rank %d, which rejoined: %w", d.rank, step, r, err)
			}
			kind := c.Tag & kindMask
			d.log.Trace().Int("from", r).Uint32("kind", kind).Msg("driver: drained")
			if kind == kindGradient {
				err = d.fold(c)
			}
			c.Release()
			if err != nil {
				return err
			}
			if kind == kindMarker {
				break
			}
		}
	}
	return nil
}

// fold adds a child's gradient message (payload and child slots) to the
// buffer.
func (d *Driver) fold(c *ringtail.Contribution) error {
	if err := c.FoldInto(ringtail.Float32s(d.buf)); err != nil {
		return fmt.Errorf("driver: rank %d: %w", d.rank, err)
	}
	return nil
}

func f32(b []byte) []float32 {
	if len(b) == 0 {
		return []float32{}
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

// childStep does a child's Ready: the gradient to the parent; then it
// takes what the parent sent — reports (replayed, so it decides what the
// members decide) and the newest state.
func (d *Driver) childStep(ctx context.Context, rd straggler.Ready, in StepInput) (Result, error) {
	start := time.Now()
	res := Result{Step: rd.Step, Plan: rd.Plan, Role: straggler.RoleChild}
	if rd.Idle {
		return d.idleStep(ctx, rd, res, start)
	}
	cycle := in.Arrival
	if !d.lastPost.IsZero() {
		cycle = start.Sub(d.lastPost)
	}
	d.lastPost = start
	d.layout.Clear(d.buf)
	d.layout.WriteChild(d.buf, d.rank, in.Samples, in.Compute, cycle, rd.Step)
	// The gradient goes from a buffer of its own, so the caller computes
	// the next one while a slow link carries this one.
	o := &d.gradOut[d.gradNext]
	d.gradNext ^= 1
	if !o.free() {
		if err := o.post.Wait(ctx); err != nil {
			return res, fmt.Errorf("driver: rank %d: gradient to rank %d: %w", d.rank, rd.Parent, err)
		}
	}
	if o.buf == nil {
		o.buf = make([]float32, len(d.buf))
	}
	copy(o.buf, d.buf)
	post, err := d.gradWire.post(ctx, d.comm, rd.Parent, bandwidth(d.pol, d.rank, rd.Parent), o.buf, tag(kindGradient, rd.Step), d.log)
	if err != nil {
		return res, fmt.Errorf("driver: rank %d: gradient to rank %d: %w", d.rank, rd.Parent, err)
	}
	o.post = post
	d.node.AdvanceChild()
	if err := d.receive(ctx, &res, rd.Await); err != nil {
		return res, err
	}
	res.Wait = time.Since(start)
	res.Next = d.node.Plan()
	d.gradWire.reap(d.log)
	res.Wire = d.gradWire.stats
	if d.node.Marker() {
		// The last gradient before rejoining (or the end) is followed by
		// a marker, so the old parent folds exactly what was sent.
		if err := d.post(ctx, rd.Parent, d.buf[:0], tag(kindMarker, d.node.Next())); err != nil {
			return res, err
		}
	}
	return res, nil
}

// idleStep is a child's iteration that computes nothing (its rows are
// the members'): it waits for the next message from its parent — the
// report of the members' next step, or a state — takes it and whatever
// else came, and sends the marker when it rejoins or training ends.
func (d *Driver) idleStep(ctx context.Context, rd straggler.Ready, res Result, start time.Time) (Result, error) {
	c, err := d.comm.TakeContributionMatching(ctx, rd.Parent, 0, 0)
	if err != nil {
		return res, fmt.Errorf("driver: rank %d: waiting for the members' next step from rank %d: %w", d.rank, rd.Parent, err)
	}
	switch c.Tag & kindMask {
	case kindReport:
		err = d.replay(c)
	case kindState:
		var a straggler.Adoption
		a, err = d.adopt(c)
		res.StateReplaced, res.Done = a.Take, a.Done
	default:
		c.Release()
		err = fmt.Errorf("driver: rank %d: unexpected message (tag %#x) from its parent, rank %d", d.rank, c.Tag, rd.Parent)
	}
	if err != nil {
		return res, err
	}
	if !res.Done {
		if err := d.receive(ctx, &res, false); err != nil {
			return res, err
		}
	}
	res.Wait = time.Since(start)
	res.Next = d.node.Plan()
	if d.node.Marker() {
		if err := d.post(ctx, rd.Parent, d.buf[:0], tag(kindMarker, d.node.Next())); err != nil {
			return res, err
		}
	}
	return res, nil
}

// receive replays the reports the parent forwarded and takes the newest
// state; with block, it waits for one state first.
func (d *Driver) receive(ctx context.Context, res *Result, block bool) error {
	for {
		if err := d.replayReports(); err != nil {
			return err
		}
		block = block || d.node.MustAwait()
		parent := d.node.Parent()
		var st *ringtail.Contribution
		if block {
			d.log.Trace().Int("parent", parent).Msg("driver: waiting for a state")
			c, err := d.comm.TakeContributionMatching(ctx, parent, kindState, kindMask)
			if err != nil {
				return fmt.Errorf("driver: rank %d: waiting for parameters from rank %d: %w", d.rank, parent, err)
			}
			st, block = c, false
		} else if c, ok := d.comm.TryContribution(parent, kindState, kindMask); ok {
			st = c
		} else {
			return nil
		}
		a, err := d.adopt(st)
		if err != nil {
			return err
		}
		res.StateReplaced = res.StateReplaced || a.Take
		res.Done = res.Done || a.Done
		if a.Done || a.Rejoin {
			return d.replayReports()
		}
	}
}

// replayReports feeds the Node every forwarded report that has arrived,
// in step order.
func (d *Driver) replayReports() error {
	for {
		from, step := d.node.ExpectReport()
		c, ok := d.comm.TryContribution(from, tag(kindReport, step), math.MaxUint32)
		if !ok {
			return nil
		}
		if err := d.replay(c); err != nil {
			return err
		}
	}
}

// replay feeds the Node one forwarded report (it must be of the step the
// Node expects: the parent forwards them in step order).
func (d *Driver) replay(c *ringtail.Contribution) error {
	defer c.Release()
	_, step := d.node.ExpectReport()
	// A tag holds a step's low 30 bits: compare those.
	if got := c.Tag >> kindBits; got != tag(kindReport, step)>>kindBits {
		return fmt.Errorf("driver: rank %d: report of step %d (mod 2³⁰) from rank %d, expected step %d", d.rank, got, c.From, step)
	}
	tail := f32(c.Data.Bytes)
	if len(tail) != d.layout.Tail() {
		return fmt.Errorf("driver: rank %d: report of step %d has %d elements, want %d", d.rank, step, len(tail), d.layout.Tail())
	}
	copy(d.buf[d.layout.Payload:], tail)
	rep, err := d.layout.Read(d.buf, step)
	if err != nil {
		return err
	}
	if err := d.node.Replay(rep); err != nil {
		return fmt.Errorf("driver: %w", err)
	}
	return nil
}

// adopt copies a state message into the caller's state when the Node
// takes it; a rejoin state also replays the reports before it.
func (d *Driver) adopt(c *ringtail.Contribution) (straggler.Adoption, error) {
	defer c.Release()
	data := f32(c.Data.Bytes)
	version, flags, err := readStateHeader(data)
	if err != nil {
		return straggler.Adoption{}, fmt.Errorf("driver: rank %d: %w", d.rank, err)
	}
	a := d.node.Adopt(version, flags)
	if !a.Take {
		return a, nil
	}
	off := stateHeader
	for i, part := range d.state {
		if i > 0 && !a.Full {
			break
		}
		if off+len(part) > len(data) {
			return a, fmt.Errorf("driver: rank %d: state message of %d elements, state part %d needs %d more", d.rank, len(data), i, off+len(part)-len(data))
		}
		off += copy(part, data[off:off+len(part)])
	}
	d.log.Trace().Int("version", version).Int("flags", int(flags)).Msg("driver: adopted a state")
	if a.Rejoin {
		if err := d.replayReports(); err != nil {
			return a, err
		}
		if err := d.node.Rejoined(version); err != nil {
			return a, fmt.Errorf("driver: %w", err)
		}
	}
	return a, nil
}

// Flush ends training: members send children the final state (the caller
// has applied every update) and fold every gradient the children still
// send; then one reduction over every rank sums what was folded. Every
// rank must call it after its last Step (a child: after a Step returned
// Done, or once Next reaches the end — a rank evicted by the last member
// step's decision takes the final state and sends its marker here); the
// payload then holds the sum over the Result's Applied samples (often 0:
// apply an update only when Applied > 0).
func (d *Driver) Flush(ctx context.Context) (Result, error) {
	start := time.Now()
	opCtx, cancel := context.WithTimeout(ctx, d.cfg.OpTimeout)
	defer cancel()
	rd := d.node.Flush()
	res := Result{Step: rd.Step, Plan: straggler.Ring(rd.Step, d.world, d.pol.GlobalBatch), Next: rd.Plan}
	if rd.Await {
		// Evicted by the last member step's decision: there was no step
		// left to compute as a child, but its parent's Flush sends it the
		// final state and folds what it sent up to a marker. Take the one
		// and send the other, as a child's last Step would have.
		var got Result
		for !d.node.Done() {
			if err := d.receive(opCtx, &got, true); err != nil {
				return res, err
			}
		}
		if err := d.post(opCtx, rd.Parent, d.buf[:0], tag(kindMarker, d.node.Next())); err != nil {
			return res, err
		}
	}
	clear(d.buf)
	if _, err := d.postStates(opCtx, rd.States); err != nil {
		return res, err
	}
	if err := d.drain(opCtx, rd.Step, rd.Drain); err != nil {
		return res, err
	}
	if err := d.settle(opCtx); err != nil {
		return res, err
	}
	if err := d.comm.AllReduce(opCtx, ringtail.Float32s(d.buf), ringtail.Sum); err != nil {
		return res, fmt.Errorf("driver: rank %d: flush: %w", d.rank, err)
	}
	res.Wait = time.Since(start)
	rep, err := d.layout.Read(d.buf, rd.Step)
	if err != nil {
		return res, err
	}
	res.Report, res.Applied = rep, rep.Applied
	for _, cr := range rep.Child {
		res.Folded += cr.Count
	}
	return res, nil
}

func (d *Driver) logDecision(res Result) {
	p, next := res.Plan, res.Next
	ev := d.log.Debug()
	if p.Mode != next.Mode || !slices.Equal(p.Evicted, next.Evicted) || p.Late != next.Late {
		ev = d.log.Info()
	}
	if !ev.Enabled() {
		return
	}
	ms := func(ds []time.Duration) []float64 {
		out := make([]float64, len(ds))
		for i, x := range ds {
			out[i] = float64(x) / float64(time.Millisecond)
		}
		return out
	}
	ev.Int("step", next.Step).Int("decided_at", res.Step).Str("role", res.Role.String()).
		Int("applied", res.Applied).Int("folded", res.Folded).Float64("staleness", res.Staleness).Dur("wait", res.Wait).
		Str("mode", next.Mode.String()).Ints("evicted", next.Evicted).Int("late", next.Late).Int("staleness_bound", next.Staleness).
		Dur("budget", next.Budget).Ints("shares", next.Shares).
		Floats64("per_sample_ms", ms(next.PerSample)).Floats64("predicted_ms", ms(next.Predicted)).
		Dur("collective", next.Collective).Float64("cost_s", next.Cost).Ints("stragglers", next.Stragglers).
		Msg("driver: plan")
}
