package driver

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/straggler"
	"github.com/ringtail-ml/ringtail/straggler/driver/policy"
)

// Comm is the part of a ringtail communicator the Driver uses;
// *ringtail.Comm implements it.
type Comm interface {
	// Rank returns this rank.
	Rank() int
	// Size returns the world size.
	Size() int
	// AllReduce reduces buf across all ranks in place.
	AllReduce(ctx context.Context, buf ringtail.Buffer, op ringtail.Op) error
	// AllReduceAmong reduces buf across members only.
	AllReduceAmong(ctx context.Context, buf ringtail.Buffer, op ringtail.Op, members []int) error
	// Contribute sends buf to peer as an eager message tagged tag.
	Contribute(ctx context.Context, peer int, buf ringtail.Buffer, tag uint32) error
	// NextContribution returns the earliest unclaimed contribution from
	// any rank of from, or ctx's error when ctx ends first.
	NextContribution(ctx context.Context, from []int) (*ringtail.Contribution, error)
}

var _ Comm = (*ringtail.Comm)(nil)

// ErrInvalidConfig is wrapped by configuration and argument errors.
var ErrInvalidConfig = errors.New("driver: invalid config")

// DefaultOpTimeout bounds every wait of a step that is not a policy wait:
// for a gradient owed from the previous step, for a child's result.
const DefaultOpTimeout = 5 * time.Minute

// Config configures a Driver.
type Config struct {
	// Comm connects the rank to the job; required.
	Comm Comm
	// Payload is the number of float32 elements the caller reduces each
	// step (gradient sums, a loss sum …); ≥ 0.
	Payload int
	// Policy configures the decisions; World defaults to Comm.Size().
	Policy policy.Config
	// OpTimeout bounds waits for owed gradients and results (default
	// DefaultOpTimeout). The Comm's own OpTimeout bounds its collectives.
	OpTimeout time.Duration
	// Logger receives one debug event per decision (info when the mode
	// changes); the zero value discards them.
	Logger zerolog.Logger
}

// Role is what a rank does in a step.
type Role int

const (
	// RoleMember is a ring member without children.
	RoleMember Role = iota
	// RoleParent is a ring member that collects children's gradients.
	RoleParent
	// RoleChild is an evicted rank: it contributes to its parent and
	// receives the step's result from it.
	RoleChild
)

// String returns "member", "parent" or "child".
func (r Role) String() string {
	switch r {
	case RoleMember:
		return "member"
	case RoleParent:
		return "parent"
	case RoleChild:
		return "child"
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// StepInput is what the caller reports about its compute of a step.
type StepInput struct {
	// Samples is the number of samples whose gradients the payload sums.
	Samples int
	// Compute is the time spent computing them: under a budget, the time
	// at which the last whole sample was done (not the time the budget
	// stopped a sample in progress).
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
	// Step is the step executed.
	Step int
	// Role is this rank's role in it.
	Role Role
	// Applied is the number of samples whose gradients the payload now
	// sums (every rank's on-time gradient plus gradients folded late).
	Applied int
	// Late is the part of Applied folded a step late.
	Late int
	// Carried counts this rank's children whose gradient missed the wait;
	// it is folded at the next step.
	Carried int
	// Wait is the time from the call to the result (waiting for children,
	// owed gradients, the ring, or the parent).
	Wait time.Duration
	// Plan is the plan executed; Next the plan of the next step.
	Plan, Next policy.Plan
	// Report is the decoded report the next plan was decided from.
	Report policy.Report
}

type owed struct{ child, step int }

// Driver executes the straggler policy for one rank: call Step once per
// training step after filling Buffer with the step's gradient sum. It is
// owned by the calling goroutine (not safe for concurrent use), starts no
// goroutines, and every blocking wait is bounded by the caller's context
// and OpTimeout.
type Driver struct {
	cfg    Config
	comm   Comm
	rank   int
	world  int
	layout policy.Layout
	buf    []float32
	pol    *policy.Policy
	plan   policy.Plan
	box    mailbox
	owed   []owed // children's gradients to fold at the next step
	wait   time.Duration
	log    zerolog.Logger
}

// New validates cfg and returns a Driver whose first step runs the plain
// ring with equal shares.
func New(cfg Config) (*Driver, error) {
	if cfg.Comm == nil {
		return nil, fmt.Errorf("driver: no communicator: %w", ErrInvalidConfig)
	}
	if cfg.Payload < 0 {
		return nil, fmt.Errorf("driver: payload %d must be ≥ 0: %w", cfg.Payload, ErrInvalidConfig)
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
	pol, err := policy.New(cfg.Policy)
	if err != nil {
		return nil, err
	}
	l := policy.Layout{Payload: cfg.Payload, World: world}
	return &Driver{cfg: cfg, comm: cfg.Comm, rank: rank, world: world, layout: l, buf: make([]float32, l.Len()),
		pol: pol, plan: pol.Plan(), box: newMailbox(cfg.Comm, rank, world),
		log: cfg.Logger.With().Int("rank", rank).Logger()}, nil
}

// Buffer returns the payload: fill it with the step's gradient sum before
// Step; after Step it holds the sum over the Result's Applied samples.
func (d *Driver) Buffer() []float32 { return d.buf[:d.layout.Payload] }

// Layout returns the buffer layout.
func (d *Driver) Layout() policy.Layout { return d.layout }

// Plan returns the plan of the next Step.
func (d *Driver) Plan() policy.Plan { return d.plan }

// Share returns rank's batch share in the next Step.
func (d *Driver) Share(rank int) int { return d.plan.Shares[rank] }

// Policy returns the configuration of the driver's policy.
func (d *Driver) Policy() policy.Config { return d.pol.Config() }

// Pending returns the number of children's gradients this rank will fold
// at the next step (or Flush).
func (d *Driver) Pending() int { return len(d.owed) }

// Step reduces the payload under the current plan and decides the next.
// On error the communicator may have failed (see ringtail.Error); the
// Driver is not usable after one.
func (d *Driver) Step(ctx context.Context, in StepInput) (Result, error) {
	if in.Samples < 0 || in.Compute < 0 || in.Arrival < 0 {
		return Result{}, fmt.Errorf("driver: rank %d: negative samples, compute or arrival in %+v: %w", d.rank, in, ErrInvalidConfig)
	}
	start := time.Now()
	p := d.plan
	res := Result{Step: p.Step, Plan: p}
	d.begin(in.Samples, policy.RankReport{Present: true, Samples: in.Samples, Compute: in.Compute, Arrival: in.Arrival, Cut: in.Cut, Wait: d.wait})

	opCtx, cancel := context.WithTimeout(ctx, d.cfg.OpTimeout)
	defer cancel()
	if err := d.foldOwed(opCtx, p.Step); err != nil {
		return res, err
	}
	if parent, ok := p.ParentOf(d.rank); ok {
		res.Role = RoleChild
		if err := d.child(opCtx, p.Step, parent); err != nil {
			return res, err
		}
	} else {
		res.Role = RoleMember
		children := p.Children(d.rank)
		if len(children) > 0 {
			res.Role = RoleParent
			carried, err := d.collect(opCtx, p, children, start.Add(-in.Arrival))
			if err != nil {
				return res, err
			}
			res.Carried = carried
		}
		if err := d.reduce(opCtx, p); err != nil {
			return res, err
		}
		for _, c := range children {
			if err := d.comm.Contribute(opCtx, c, ringtail.Float32s(d.buf), tag(p.Step, kindResult)); err != nil {
				return res, fmt.Errorf("driver: rank %d step %d: result to child %d: %w", d.rank, p.Step, c, err)
			}
		}
	}
	d.wait = time.Since(start)
	res.Wait = d.wait
	return d.finish(res)
}

// Flush folds the gradients still owed by late children into one more
// reduction over every rank, so that nothing computed is lost at the end
// of a run. Every rank must call it after its last Step; the payload then
// holds the sum over the Result's Applied samples (often 0: apply an update
// only when Applied > 0). It does not advance the step or the policy.
func (d *Driver) Flush(ctx context.Context) (Result, error) {
	start := time.Now()
	p := policy.Ring(d.plan.Step, d.world, d.pol.Config().GlobalBatch)
	res := Result{Step: p.Step, Plan: p, Next: d.plan}
	clear(d.Buffer())
	d.begin(0, policy.RankReport{Present: true})
	opCtx, cancel := context.WithTimeout(ctx, d.cfg.OpTimeout)
	defer cancel()
	if err := d.foldOwed(opCtx, p.Step); err != nil {
		return res, err
	}
	if err := d.reduce(opCtx, p); err != nil {
		return res, err
	}
	res.Wait = time.Since(start)
	rep, err := d.layout.Read(d.buf, p.Step)
	if err != nil {
		return res, err
	}
	res.Report, res.Applied = rep, rep.Applied
	for _, rr := range rep.Late {
		res.Late += rr.Samples
	}
	return res, nil
}

// Close releases contributions still held. It does not close the Comm.
func (d *Driver) Close() { d.box.release() }

// begin clears the tail and writes this rank's samples and report.
func (d *Driver) begin(samples int, rr policy.RankReport) {
	clear(d.buf[d.layout.Payload:])
	d.buf[d.layout.SamplesAt()] = float32(samples)
	d.layout.Write(d.buf, false, d.rank, rr)
}

// foldOwed folds the gradients of step−1 that this rank's children owe:
// staleness is bounded by one step, so this waits for each (up to
// OpTimeout) rather than letting it slip further.
func (d *Driver) foldOwed(ctx context.Context, step int) error {
	for _, o := range d.owed {
		c, err := d.box.take(ctx, o.child, tag(o.step, kindGradient))
		if err != nil {
			return fmt.Errorf("driver: rank %d step %d: gradient of step %d owed by child %d: %w", d.rank, step, o.step, o.child, err)
		}
		err = d.fold(c, true)
		c.Release()
		if err != nil {
			return err
		}
	}
	d.owed = d.owed[:0]
	return nil
}

// collect waits until the plan's WaitUntil (from the step start) for the
// children's gradients of this step and folds those that came; the others
// are owed at the next step. It returns how many are owed.
func (d *Driver) collect(ctx context.Context, p policy.Plan, children []int, stepStart time.Time) (int, error) {
	wctx, cancel := context.WithDeadline(ctx, stepStart.Add(p.WaitUntil))
	defer cancel()
	carried := 0
	for _, ch := range children {
		c, err := d.box.take(wctx, ch, tag(p.Step, kindGradient))
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				d.owed = append(d.owed, owed{child: ch, step: p.Step})
				carried++
				continue
			}
			return carried, fmt.Errorf("driver: rank %d step %d: waiting for child %d: %w", d.rank, p.Step, ch, err)
		}
		err = d.fold(c, false)
		c.Release()
		if err != nil {
			return carried, err
		}
	}
	return carried, nil
}

// child sends this rank's buffer to its parent and waits for the step's
// result.
func (d *Driver) child(ctx context.Context, step, parent int) error {
	if err := d.comm.Contribute(ctx, parent, ringtail.Float32s(d.buf), tag(step, kindGradient)); err != nil {
		return fmt.Errorf("driver: rank %d step %d: gradient to parent %d: %w", d.rank, step, parent, err)
	}
	c, err := d.box.take(ctx, parent, tag(step, kindResult))
	if err != nil {
		return fmt.Errorf("driver: rank %d step %d: result from parent %d: %w", d.rank, step, parent, err)
	}
	defer c.Release()
	src, err := d.view(c)
	if err != nil {
		return err
	}
	copy(d.buf, src)
	return nil
}

// reduce runs the ring of the plan's members.
func (d *Driver) reduce(ctx context.Context, p policy.Plan) error {
	buf := ringtail.Float32s(d.buf)
	var err error
	if len(p.Members) == d.world {
		err = d.comm.AllReduce(ctx, buf, ringtail.Sum)
	} else {
		err = d.comm.AllReduceAmong(ctx, buf, ringtail.Sum, p.Members)
	}
	if err != nil {
		return fmt.Errorf("driver: rank %d step %d: reduction among %d ranks: %w", d.rank, p.Step, len(p.Members), err)
	}
	return nil
}

// fold adds a child's contribution to the buffer: whole when it is of this
// step (its slots are its own), or with its report moved to the late slots
// when it is a step late.
func (d *Driver) fold(c *ringtail.Contribution, late bool) error {
	src, err := d.view(c)
	if err != nil {
		return err
	}
	n := d.layout.Payload
	dst := d.buf
	for i, v := range src[:n] {
		dst[i] += v
	}
	if late {
		d.layout.FoldLate(dst, src, c.From)
		return nil
	}
	for i := n; i < len(dst); i++ {
		dst[i] += src[i]
	}
	return nil
}

// view returns a contribution's data as float32s, checking its shape.
func (d *Driver) view(c *ringtail.Contribution) ([]float32, error) {
	if c.Data.DType != ringtail.Float32 || c.Data.Len() != len(d.buf) {
		return nil, fmt.Errorf("driver: rank %d: contribution from rank %d (tag %d) has %d × %v, want %d × float32",
			d.rank, c.From, c.Tag, c.Data.Len(), c.Data.DType, len(d.buf))
	}
	if len(c.Data.Bytes) == 0 {
		return []float32{}, nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(c.Data.Bytes))), len(d.buf)), nil
}

// finish decodes the reduced buffer, feeds the policy and logs its
// decision.
func (d *Driver) finish(res Result) (Result, error) {
	rep, err := d.layout.Read(d.buf, res.Step)
	if err != nil {
		return res, err
	}
	res.Report, res.Applied = rep, rep.Applied
	for _, rr := range rep.Late {
		res.Late += rr.Samples
	}
	next, err := d.pol.Observe(rep)
	if err != nil {
		return res, fmt.Errorf("driver: rank %d: %w", d.rank, err)
	}
	d.plan, res.Next = next, next
	d.logDecision(res)
	d.record(res) // observability (issue 14): one StepEvent per step; see observe.go
	return res, nil
}

func (d *Driver) logDecision(res Result) {
	p, next := res.Plan, res.Next
	ev := d.log.Debug()
	if p.Mode != next.Mode || len(p.Evicted) != len(next.Evicted) {
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
		Int("applied", res.Applied).Int("late", res.Late).Int("carried", res.Carried).Dur("wait", res.Wait).
		Str("mode", next.Mode.String()).Ints("evicted", next.Evicted).Dur("wait_until", next.WaitUntil).
		Dur("budget", next.Budget).Ints("shares", next.Shares).
		Floats64("per_sample_ms", ms(next.PerSample)).Floats64("predicted_ms", ms(next.Predicted)).
		Dur("collective", next.Collective).Float64("cost_s", next.Cost).Ints("stragglers", next.Stragglers).
		Msg("driver: plan")
	if next.Mode == straggler.ModeEvict {
		for _, a := range next.Parents {
			d.log.Debug().Int("step", next.Step).Int("child", a.Child).Int("parent", a.Parent).Msg("driver: parent")
		}
	}
}
