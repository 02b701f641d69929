package driver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/straggler"
)

// ReassignInput is one step's compute under in-step work reassignment
// (FlexRR, straggler.Reassigner): the step's batch is cut into units, and
// units a slow rank has not started move, during the step, to ranks that
// are ahead; every unit is computed exactly once, so the step's sum is
// synchronous SGD's.
type ReassignInput struct {
	// Config configures the reassignment (unit size, helper group, …).
	Config straggler.ReassignConfig
	// Rows is the step's global batch: the units cover the rows [0, Rows)
	// laid out by the plan's shares in rank order (as Sync.Share).
	Rows int
	// Expect is this rank's expected compute time of its own share (the
	// time scale of its progress reports); > 0.
	Expect time.Duration
	// Delay is when, from the call, this rank begins computing (a late
	// data loader or a pause): it answers messages meanwhile, so its
	// units can move to helpers before it starts.
	Delay time.Duration
	// Compute computes the gradients of the rows [u.Lo, u.Hi) of the
	// batch into the driver's Buffer (adding to what is there). Its
	// error ends the step.
	Compute func(ctx context.Context, u straggler.Unit) error
}

// ReassignOutput is what a reassigned step's compute did on this rank.
type ReassignOutput struct {
	// Samples is the rows this rank computed (its own and others'); the
	// step's Samples for Step.
	Samples int
	// Compute is the time spent computing them (Delay and waits
	// excluded); Elapsed the time from the call to the end of this rank's
	// last unit (or of its Delay, when it computed none): its arrival, as
	// Step wants it — the wait for the other ranks' ends that follows is
	// the step's wait, like the reduction's.
	Compute, Elapsed time.Duration
	// Units are the units computed, in order.
	Units []straggler.Unit
	// Moved is how many of this rank's units it granted to helpers;
	// Helped how many of others' units it computed.
	Moved, Helped int
	// Messages is how many reassignment messages this rank sent.
	Messages int
}

// ErrNotReassignable is returned by Reassign for a step whose plan has
// ranks outside the reduction (children, excluded ranks): compute the
// share (Sync.Share) as usual.
var ErrNotReassignable = errors.New("driver: this step's plan does not reassign work")

// CanReassign reports whether the next step runs under Reassign: its plan
// says so (Plan.Reassign: the policy's Config.Reassign is set and its
// predictions miss by more than reassignment costs, Config.ReassignAt),
// every rank is a member of a plain reduction in it and was in the step
// before.
// (A rank that rejoins from its own pace enters its first member step
// only once its parent has sent it the parameters, which the parent does
// after its compute: were that step reassigned, the parent would wait
// for the rejoining rank's messages and the rank for the parameters.)
func (d *Driver) CanReassign() bool {
	p := d.node.Plan()
	return p.Reassign && d.lastFull && d.node.Role() == straggler.RoleMember && d.full(p)
}

// full reports whether every rank is a member of p's plain reduction.
func (d *Driver) full(p straggler.Plan) bool {
	return len(p.Members) == d.world && len(p.Parents) == 0 && len(p.Shares) == d.world
}

// Reassign runs this rank's compute of the next step with in-step work
// reassignment, every rank at once (each calls Reassign for the same
// step); then call Step with the output's Samples, Compute and Elapsed as
// usual. Messages travel as contributions beside the reduction's; one of
// an earlier step that arrives late is dropped. Each wait is bounded by
// the operation timeout.
func (d *Driver) Reassign(ctx context.Context, in ReassignInput) (ReassignOutput, error) {
	var out ReassignOutput
	if !d.CanReassign() {
		return out, ErrNotReassignable
	}
	if in.Rows < 0 || in.Compute == nil || in.Expect <= 0 || in.Delay < 0 {
		return out, fmt.Errorf("driver: reassign: rows %d, expect %v, delay %v, compute set %v: %w", in.Rows, in.Expect, in.Delay, in.Compute != nil, ErrInvalidConfig)
	}
	p := d.node.Plan()
	step := d.node.Next()
	counts := make([]int, d.world)
	for q := range counts {
		lo, hi := straggler.ShareRange(p.Shares, in.Rows, q)
		counts[q] = hi - lo
	}
	units, _ := straggler.ReassignUnits(counts, in.Config.UnitSize)
	ra, err := straggler.NewReassigner(in.Config, d.rank, step, counts, in.Expect)
	if err != nil {
		return out, fmt.Errorf("driver: rank %d step %d: %w", d.rank, step, err)
	}
	peers := slices.Compact(slices.Sorted(slices.Values(append(ra.Helpers(), ra.Helpees()...))))
	r := reassignRun{d: d, ra: ra, step: step, peers: peers, start: time.Now()}
	if err := r.run(ctx, in, units, &out); err != nil {
		return out, fmt.Errorf("driver: rank %d step %d: reassignment: %w", d.rank, step, err)
	}
	out.Elapsed = max(r.lastEnd, in.Delay)
	out.Moved, out.Messages = ra.Moved(), r.sent
	return out, nil
}

// reassignRun is one Reassign call's loop state.
type reassignRun struct {
	d     *Driver
	ra    *straggler.Reassigner
	step  int
	peers []int
	start time.Time
	sent  int
	// lastEnd is when, from start, the last unit this rank computed
	// ended.
	lastEnd time.Duration
}

func (r *reassignRun) now() time.Duration { return time.Since(r.start) }

func (r *reassignRun) run(ctx context.Context, in ReassignInput, units []straggler.Unit, out *ReassignOutput) error {
	for {
		if err := r.poll(); err != nil {
			return err
		}
		if err := r.send(ctx); err != nil {
			return err
		}
		if r.now() >= in.Delay {
			if u, ok := r.ra.Start(r.now()); ok {
				if err := r.send(ctx); err != nil { // a claim made as the unit starts
					return err
				}
				if u < 0 || u >= len(units) {
					return fmt.Errorf("unit %d of %d", u, len(units))
				}
				t0 := time.Now()
				if err := in.Compute(ctx, units[u]); err != nil {
					return err
				}
				out.Compute += time.Since(t0)
				r.lastEnd = r.now()
				if err := r.ra.Finish(u, r.lastEnd); err != nil {
					return err
				}
				out.Units = append(out.Units, units[u])
				out.Samples += units[u].Hi - units[u].Lo
				if units[u].Owner != r.d.rank {
					out.Helped++
				}
				continue
			}
		}
		if r.ra.Done() {
			return nil
		}
		if err := r.wait(ctx, in.Delay); err != nil {
			return err
		}
	}
}

// wait blocks for the next message (until the delay ends, when it has
// not), bounded by the operation timeout.
func (r *reassignRun) wait(ctx context.Context, delay time.Duration) error {
	deadline := time.Now().Add(r.d.cfg.OpTimeout)
	early := false
	if at := r.start.Add(delay); time.Now().Before(at) {
		deadline, early = at, true
	}
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	c, err := r.d.comm.NextContributionMatching(wctx, r.peers, kindReassign, kindMask)
	switch {
	case err == nil:
		return r.take(c)
	case early && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		return nil // the delay is over: start computing
	case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("no reassignment message from ranks %v for %v (operation timeout)", r.peers, r.d.cfg.OpTimeout)
	}
	return err
}

// poll takes every reassignment message that has arrived.
func (r *reassignRun) poll() error {
	for _, p := range r.peers {
		for {
			c, ok := r.d.comm.TryContribution(p, kindReassign, kindMask)
			if !ok {
				break
			}
			if err := r.take(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// take decodes one message and hands it to the Reassigner; one of an
// earlier step (a progress report or claim that arrived after this rank
// had left that step) is dropped.
func (r *reassignRun) take(c *ringtail.Contribution) error {
	m, err := decodeReassign(c.Data.Bytes, c.Data.DType)
	from := c.From
	c.Release()
	if err != nil {
		return fmt.Errorf("message from rank %d: %w", from, err)
	}
	switch {
	case m.Step < r.step:
		return nil
	case m.Step > r.step || m.From != from || m.To != r.d.rank:
		return fmt.Errorf("message %v from rank %d for step %d to rank %d in step %d", m, from, m.Step, m.To, r.step)
	}
	return r.ra.Receive(m, r.now())
}

// send posts the messages the Reassigner has ready.
func (r *reassignRun) send(ctx context.Context) error {
	for _, m := range r.ra.Ready() {
		// The posting is not waited for: its buffer is the message's own,
		// and a failed send fails the communicator, which every wait sees.
		if _, err := r.d.comm.ContributeAsync(ctx, m.To, ringtail.Int64s(encodeReassign(m)), tag(kindReassign, r.step)); err != nil {
			return fmt.Errorf("%v to rank %d: %w", m, m.To, err)
		}
		r.sent++
	}
	return nil
}

// The wire form of a ReassignMsg: int64 words kind, from, to, step, frac
// (float64 bits), at, per-unit (ns), offer, span lo, span hi, then three
// words (offer, lo, hi) per grant.
const reassignWords = 10

func encodeReassign(m straggler.ReassignMsg) []int64 {
	w := make([]int64, reassignWords, reassignWords+3*len(m.Grants))
	w[0], w[1], w[2], w[3] = int64(m.Kind), int64(m.From), int64(m.To), int64(m.Step)
	w[4], w[5], w[6] = int64(math.Float64bits(m.Frac)), int64(m.At), int64(m.PerUnit)
	w[7], w[8], w[9] = int64(m.Offer), int64(m.Span.Lo), int64(m.Span.Hi)
	for _, g := range m.Grants {
		w = append(w, int64(g.Offer), int64(g.Span.Lo), int64(g.Span.Hi))
	}
	return w
}

// errBadReassign is wrapped by decodeReassign's errors.
var errBadReassign = errors.New("malformed reassignment message")

func decodeReassign(b []byte, dt ringtail.DType) (straggler.ReassignMsg, error) {
	var m straggler.ReassignMsg
	if dt != ringtail.Int64 || len(b)%8 != 0 || len(b)/8 < reassignWords || (len(b)/8-reassignWords)%3 != 0 {
		return m, fmt.Errorf("%w: %d bytes of %v", errBadReassign, len(b), dt)
	}
	w := make([]int64, len(b)/8)
	for i := range w {
		w[i] = int64(binary.NativeEndian.Uint64(b[8*i:])) // as ringtail.Int64s laid them out
	}
	if w[0] < int64(straggler.MsgProgress) || w[0] > int64(straggler.MsgDone) {
		return m, fmt.Errorf("%w: kind %d", errBadReassign, w[0])
	}
	m.Kind, m.From, m.To, m.Step = straggler.MsgKind(w[0]), int(w[1]), int(w[2]), int(w[3])
	m.Frac, m.At, m.PerUnit = math.Float64frombits(uint64(w[4])), time.Duration(w[5]), time.Duration(w[6])
	m.Offer, m.Span = int(w[7]), straggler.Span{Lo: int(w[8]), Hi: int(w[9])}
	for i := reassignWords; i < len(w); i += 3 {
		m.Grants = append(m.Grants, straggler.Grant{Offer: int(w[i]), Span: straggler.Span{Lo: int(w[i+1]), Hi: int(w[i+2])}})
	}
	if m.Kind != straggler.MsgDone && len(m.Grants) > 0 {
		return m, fmt.Errorf("%w: a %v with grants", errBadReassign, m.Kind)
	}
	return m, nil
}
