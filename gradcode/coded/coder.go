package coded

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/gradcode"
)

// Message kinds, in the low bits of a contribution's tag; the step is above.
const (
	kindPayload = 0
	kindResult  = 1
	kindBits    = 2
)

func tagOf(step, kind int) uint32 { return uint32(step)<<kindBits | uint32(kind) }

func untag(tag uint32) (step, kind int) { return int(tag >> kindBits), int(tag & (1<<kindBits - 1)) }

// Coder runs coded allreduce steps for one rank. It is not safe for
// concurrent use: one goroutine calls Step.
type Coder struct {
	cfg  Config
	m    Messenger
	rank int
	n    int

	plan  *gradcode.Plan
	grads [][]float64 // this rank's partition gradients, per plan
	p32   []float32   // this rank's payload when the plan sends float32
	p64   []float64   // this rank's payload when the plan sends float64

	step      int
	pending   []*ringtail.Contribution // arrived for a later step
	results   map[int][]float64        // recent sums by step
	delivered []int                    // last step whose sum this rank sent to each rank
}

// StepInfo describes a completed step.
type StepInfo struct {
	// Step is the step number (0, 1, ...).
	Step int
	// Leader is the rank that decoded the sum this rank received (this
	// rank's view: the leader when the step ended).
	Leader int
	// Survivors is the set F the sum was decoded from, in arrival order;
	// only filled on the leader.
	Survivors []int
	// Computed reports whether this rank's compute finished in time.
	Computed bool
}

// New returns a Coder for m's rank, building the first plan.
func New(m Messenger, cfg Config) (*Coder, error) {
	n := m.Size()
	if err := cfg.Validate(n); err != nil {
		return nil, err
	}
	c := &Coder{cfg: cfg.withDefaults(), m: m, rank: m.Rank(), n: n, results: map[int][]float64{}, delivered: make([]int, n)}
	for i := range c.delivered {
		c.delivered[i] = -1
	}
	if err := c.replan(); err != nil {
		return nil, err
	}
	return c, nil
}

// Plan returns the plan the next Step runs (the same on every rank): which
// partitions this rank computes is Plan().Assignment[rank]. The caller must
// not modify it.
func (c *Coder) Plan() *gradcode.Plan { return c.plan }

// Close releases contributions held for later steps.
func (c *Coder) Close() {
	for _, ct := range c.pending {
		ct.Release()
	}
	c.pending = nil
}

func (c *Coder) replan() error {
	var thr []float64
	if c.cfg.Throughputs != nil {
		thr = c.cfg.Throughputs.Throughputs()
	}
	p, err := gradcode.NewPlan(c.cfg.planConfig(c.n, thr))
	if err != nil {
		return fmt.Errorf("coded: plan for step %d: %w", c.step, err)
	}
	c.plan = p
	parts := p.Assignment[c.rank]
	c.grads = make([][]float64, len(parts))
	for i := range c.grads {
		c.grads[i] = make([]float64, c.cfg.Len)
	}
	c.p32, c.p64 = nil, nil
	if p.PayloadDType == gradcode.Float32 {
		c.p32 = make([]float32, c.cfg.Len)
	} else {
		c.p64 = make([]float64, c.cfg.Len)
	}
	return nil
}

func (c *Coder) payloadBuf() ringtail.Buffer {
	if c.p32 != nil {
		return ringtail.Float32s(c.p32)
	}
	return ringtail.Float64s(c.p64)
}

func (c *Coder) payloadDType() ringtail.DType {
	if c.plan.PayloadDType == gradcode.Float32 {
		return ringtail.Float32
	}
	return ringtail.Float64
}

// computePayload runs compute and encodes this rank's payload.
func (c *Coder) computePayload(ctx context.Context, step int, compute ComputeFunc) error {
	parts := c.plan.Assignment[c.rank]
	if len(parts) > 0 {
		if err := compute(ctx, step, c.plan.K, slices.Clone(parts), c.grads); err != nil {
			return err
		}
	}
	if c.p32 != nil {
		return gradcode.Encode(c.plan, c.rank, c.grads, c.p32)
	}
	return gradcode.Encode(c.plan, c.rank, c.grads, c.p64)
}

// live returns the ranks not known dead, ascending (this rank included).
func (c *Coder) live() []int {
	dead := c.m.Dead()
	out := make([]int, 0, c.n)
	for r := 0; r < c.n; r++ {
		if r == c.rank || !slices.Contains(dead, r) {
			out = append(out, r)
		}
	}
	return out
}

func (c *Coder) isDead(r int) bool { return slices.Contains(c.m.Dead(), r) }

// stepState is the state of one step, owned by Step's goroutine.
type stepState struct {
	t        int
	computed bool
	got      map[int]*ringtail.Contribution // payloads of step t by rank
	order    []int                          // payload arrivals, this rank included
	sentTo   int                            // leader this rank's payload went to, or −1
	sum      []float64                      // the decoded sum once known
	leader   int
	F        []int
}

// Step runs one coded allreduce step: it computes this rank's payload with
// compute, agrees with the other ranks on the survivors, and writes the
// exact gradient sum Σ_j g_j over all k partitions into out (len Len). It
// returns once the sum is known, without waiting for more than n−s ranks.
// Errors wrap ErrShape, ErrTooManyDead, the compute error, a communication
// error, or ctx's error when the step timed out.
func (c *Coder) Step(ctx context.Context, compute ComputeFunc, out []float64) (StepInfo, error) {
	if len(out) != c.cfg.Len {
		return StepInfo{}, fmt.Errorf("%w: out has %d elements, want %d", ErrShape, len(out), c.cfg.Len)
	}
	if c.cfg.ReplanEvery > 0 && c.step > 0 && c.step%c.cfg.ReplanEvery == 0 {
		if err := c.replan(); err != nil {
			return StepInfo{}, err
		}
	}
	t := c.step
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StepTimeout)
	defer cancel()

	cctx, ccancel := context.WithCancel(ctx)
	computed := make(chan error, 1)
	go func() { computed <- c.computePayload(cctx, t, compute) }()
	computeRunning := true
	defer func() {
		ccancel()
		if computeRunning {
			<-computed
		}
	}()

	others := make([]int, 0, c.n-1)
	for r := 0; r < c.n; r++ {
		if r != c.rank {
			others = append(others, r)
		}
	}
	rctx, rcancel := context.WithCancel(ctx)
	arrivals := make(chan *ringtail.Contribution)
	leftover := make(chan *ringtail.Contribution, 1)
	go receive(rctx, c.m, others, arrivals, leftover)

	st := &stepState{t: t, got: map[int]*ringtail.Contribution{}, sentTo: -1, leader: -1}
	receiving := true
	// stopReceiving ends the receiver and keeps what it had taken.
	stopReceiving := func() {
		if receiving {
			receiving = false
			rcancel()
			if ct := <-leftover; ct != nil {
				c.handle(ctx, st, ct)
			}
		}
	}
	defer func() {
		stopReceiving()
		for _, ct := range st.got {
			ct.Release()
		}
	}()

	held := c.pending
	c.pending = nil
	for _, ct := range held {
		c.handle(ctx, st, ct)
	}
	tick := time.NewTicker(c.cfg.Poll)
	defer tick.Stop()
	for {
		err := c.advance(ctx, st)
		if errors.Is(err, ErrTooManyDead) {
			// Ranks that finished the step and closed count as dead
			// too, but a leader among them sent this rank the sum
			// before it closed, and a link delivers a message before
			// its end: the sum has arrived if it was sent.
			stopReceiving()
			c.takeArrivedSum(ctx, st)
			if st.sum != nil {
				break
			}
		}
		if err != nil {
			return StepInfo{}, fmt.Errorf("coded: step %d on rank %d: %w", t, c.rank, err)
		}
		if st.sum != nil {
			break
		}
		select {
		case err := <-computed:
			computeRunning = false
			if err != nil {
				return StepInfo{}, fmt.Errorf("coded: step %d on rank %d: compute: %w", t, c.rank, err)
			}
			st.computed = true
			st.order = append(st.order, c.rank)
		case ct := <-arrivals:
			c.handle(ctx, st, ct)
		case <-tick.C:
		case <-ctx.Done():
			return StepInfo{}, fmt.Errorf("coded: step %d on rank %d: waiting for the sum (leader %d): %w", t, c.rank, st.leader, ctx.Err())
		}
	}
	copy(out, st.sum)
	c.results[t] = st.sum
	delete(c.results, t-c.cfg.History)
	c.step++
	return StepInfo{Step: t, Leader: st.leader, Survivors: st.F, Computed: st.computed}, nil
}

// sumMayCome reports whether a step that sees too few live ranks (live,
// this one included) may still get its sum: some of the ranks counted dead
// left cleanly (so the step was completed), the ranks that died are at most
// s, and a live rank other than this one may be the leader with the sum on
// its way.
func (c *Coder) sumMayCome(live []int) bool {
	left := len(c.m.Left())
	died := c.n - len(live) - left
	return left > 0 && died <= c.plan.S && len(live) > 1
}

// takeArrivedSum handles, without waiting, every result of step st.t that
// has arrived from any other rank (the receiver is stopped).
func (c *Coder) takeArrivedSum(ctx context.Context, st *stepState) {
	for r := 0; r < c.n && st.sum == nil; r++ {
		if r == c.rank {
			continue
		}
		if ct, ok := c.m.TryContribution(r, tagOf(st.t, kindResult), math.MaxUint32); ok {
			c.handle(ctx, st, ct)
		}
	}
}

// receive forwards contributions to arrivals until ctx ends; a contribution
// taken but not handed over goes to leftover (which always gets one value).
func receive(ctx context.Context, m Messenger, from []int, arrivals chan<- *ringtail.Contribution, leftover chan<- *ringtail.Contribution) {
	for {
		ct, err := m.NextContribution(ctx, from)
		if err != nil {
			leftover <- nil
			return
		}
		select {
		case arrivals <- ct:
		case <-ctx.Done():
			leftover <- ct
			return
		}
	}
}

// handle routes one contribution.
func (c *Coder) handle(ctx context.Context, st *stepState, ct *ringtail.Contribution) {
	step, kind := untag(ct.Tag)
	switch {
	case step > st.t:
		c.pending = append(c.pending, ct)
	case kind == kindPayload && step == st.t:
		if _, dup := st.got[ct.From]; dup || ct.Data.DType != c.payloadDType() || ct.Data.Len() != c.cfg.Len {
			ct.Release()
			return
		}
		st.got[ct.From] = ct
		st.order = append(st.order, ct.From)
	case kind == kindPayload:
		// A payload for an old step: its sender missed that sum (its
		// leader died) unless this rank already sent it the sum.
		ct.Release()
		if sum, ok := c.results[step]; ok && c.delivered[ct.From] < step {
			if c.m.Contribute(ctx, ct.From, ringtail.Float64s(sum), tagOf(step, kindResult)) == nil {
				c.delivered[ct.From] = step
			}
		}
	case kind == kindResult && step == st.t && st.sum == nil && ct.Data.DType == ringtail.Float64 && ct.Data.Len() == c.cfg.Len:
		st.sum = make([]float64, c.cfg.Len)
		for e := range st.sum {
			st.sum[e] = math.Float64frombits(binary.LittleEndian.Uint64(ct.Data.Bytes[8*e:]))
		}
		st.leader = ct.From
		ct.Release()
	default:
		ct.Release()
	}
}

// advance acts on the current state: the leader decodes once it can; a
// follower sends its payload to the current leader.
func (c *Coder) advance(ctx context.Context, st *stepState) error {
	if st.sum != nil {
		return nil
	}
	live := c.live()
	if len(live) < c.n-c.plan.S {
		if c.sumMayCome(live) {
			// Ranks that finished the run and left count as dead, yet
			// the step's sum exists (they could not finish without it)
			// and a live rank may be sending it: the leader sends the
			// sum to the ranks in rank order, so a rank can hear that a
			// later one got its sum and left before its own arrives.
			// Wait for it (the step's timeout bounds the wait).
			return nil
		}
		return fmt.Errorf("%w: %d of %d ranks alive, s = %d", ErrTooManyDead, len(live), c.n, c.plan.S)
	}
	st.leader = live[0]
	if st.leader != c.rank {
		if !st.computed || st.sentTo == st.leader {
			return nil
		}
		err := c.m.Contribute(ctx, st.leader, c.payloadBuf(), tagOf(st.t, kindPayload))
		if err != nil && !c.isDead(st.leader) {
			return fmt.Errorf("sending the payload to leader %d: %w", st.leader, err)
		}
		st.sentTo = st.leader
		return nil
	}
	F, ok := c.survivors(st.order)
	if !ok {
		return nil
	}
	a, err := c.plan.Decode(F)
	if err != nil {
		return fmt.Errorf("decoding survivors %v: %w", F, err)
	}
	sum := make([]float64, c.cfg.Len)
	for i, r := range F {
		if a[r] == 0 {
			continue
		}
		if r == c.rank {
			if c.p32 != nil {
				for e, x := range c.p32 {
					sum[e] += a[r] * float64(x)
				}
			} else {
				for e, x := range c.p64 {
					sum[e] += a[r] * x
				}
			}
			continue
		}
		fold(sum, a[F[i]], st.got[r].Data)
	}
	st.sum, st.F = sum, F
	buf := ringtail.Float64s(sum)
	for _, r := range live[1:] {
		err := c.m.Contribute(ctx, r, buf, tagOf(st.t, kindResult))
		if err == nil {
			c.delivered[r] = st.t
			continue
		}
		if !c.isDead(r) {
			return fmt.Errorf("sending the sum to rank %d: %w", r, err)
		}
	}
	return nil
}

// survivors returns the prefix of the arrival order the leader decodes from:
// the first n−s arrivals, or earlier the first arrivals that hold a group.
func (c *Coder) survivors(order []int) ([]int, bool) {
	need := c.n - c.plan.S
	if len(order) >= need {
		return slices.Clone(order[:need]), true
	}
	if len(c.plan.Groups) > 0 && len(order) > 0 && c.plan.Decodable(order) {
		return slices.Clone(order), true
	}
	return nil, false
}

// fold adds a·payload to sum.
func fold(sum []float64, a float64, b ringtail.Buffer) {
	if b.DType == ringtail.Float32 {
		for e := range sum {
			sum[e] += a * float64(math.Float32frombits(binary.LittleEndian.Uint32(b.Bytes[4*e:])))
		}
		return
	}
	for e := range sum {
		sum[e] += a * math.Float64frombits(binary.LittleEndian.Uint64(b.Bytes[8*e:]))
	}
}
