package straggler

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// In-step work reassignment (FlexRR's RapidReassignment, made exact).
//
// A step's batch is cut into units of ReassignConfig.UnitSize samples,
// each rank owning the units of its share (ReassignUnits). Within the
// step every rank runs one Reassigner:
//
//   - a rank reports its progress (MsgProgress) to its helpees at every
//     ReportEvery of its own work;
//   - a rank that finds itself behind a helper's report by more than
//     Trigger of a step offers that helper units from the end of the ones
//     it has not started (MsgOffer: initial size, follow-ups twice that);
//   - a helper that is (almost) out of work claims an offer (MsgClaim);
//   - the owner is the authority: it grants a claim (MsgGrant) only for
//     an offer it still holds, refuses it (MsgRefuse) after it withdrew
//     the offer to compute the units itself, and tells each helper, when
//     its own part is over, which offers it granted it (MsgDone);
//   - a helper computes units only once granted, and leaves the step once
//     its work is done, its claims answered and every helpee done.
//
// Each unit therefore has one owner-side state at any time — the owner's
// to compute, offered (to no one's computing), granted to one helper —
// and the rank that computes it is the rank that state names: every unit
// is computed, and summed, exactly once, whatever the messages' order. The
// step's update is synchronous SGD's.

// ReassignConfig configures in-step reassignment.
type ReassignConfig struct {
	// UnitSize is the samples per unit (the last unit of a share may be
	// smaller).
	UnitSize int
	// Helpers is the helper group's size: rank r's helpers are r+1, …,
	// r+Helpers (mod the world), capped at the world less one.
	Helpers int
	// Trigger is how far behind a helper's report (a fraction of a step)
	// a rank must be before it offers that helper work (FlexRR: 20%).
	Trigger float64
	// Initial is the first offer's size as a fraction of the rank's own
	// units, at least one unit (FlexRR: 2.5%); follow-ups are twice it.
	Initial float64
	// ReportEvery is the fraction of its own work at which a rank reports
	// its progress (0.25: at 25, 50, 75 and 100%).
	ReportEvery float64
	// ClaimAhead is how many units a helper has left when it claims the
	// next offer, so that a grant arrives before it runs dry.
	ClaimAhead int
}

// DefaultReassignConfig returns FlexRR's defaults for a unit of unitSize
// samples.
func DefaultReassignConfig(unitSize int) ReassignConfig {
	return ReassignConfig{UnitSize: unitSize, Helpers: 4, Trigger: 0.2, Initial: 0.025, ReportEvery: 0.25, ClaimAhead: 1}
}

// Validate reports a configuration no step can run.
func (c ReassignConfig) Validate() error {
	if c.UnitSize < 1 || c.Helpers < 0 || !(c.Trigger >= 0) || !(c.Initial > 0) || !(c.ReportEvery > 0 && c.ReportEvery <= 1) || c.ClaimAhead < 0 {
		return fmt.Errorf("straggler: reassign config %+v: need UnitSize ≥ 1, Helpers ≥ 0, Trigger ≥ 0, Initial > 0, 0 < ReportEvery ≤ 1, ClaimAhead ≥ 0: %w",
			c, ErrInvalidConfig)
	}
	return nil
}

// Span is the units [Lo, Hi) of a step.
type Span struct{ Lo, Hi int }

// Len is the span's number of units.
func (s Span) Len() int { return s.Hi - s.Lo }

// Unit is one unit of a step's batch: the samples [Lo, Hi) of the global
// batch, first owned by Owner.
type Unit struct{ Owner, Lo, Hi int }

// ReassignUnits cuts a step's batch, laid out by shares in rank order,
// into units of unitSize samples, and returns them with each rank's own
// span of them.
func ReassignUnits(shares []int, unitSize int) ([]Unit, []Span) {
	var units []Unit
	spans := make([]Span, len(shares))
	at := 0
	for r, sh := range shares {
		spans[r].Lo = len(units)
		for lo := 0; lo < sh; lo += unitSize {
			units = append(units, Unit{Owner: r, Lo: at + lo, Hi: at + min(lo+unitSize, sh)})
		}
		spans[r].Hi = len(units)
		at += sh
	}
	return units, spans
}

// MsgKind is the kind of a reassignment message.
type MsgKind int

const (
	// MsgProgress is a helper's progress report to a helpee.
	MsgProgress MsgKind = iota
	// MsgOffer offers a helper the owner's units Span (FlexRR's do-this).
	MsgOffer
	// MsgClaim asks the owner for the offer Offer (FlexRR's begun-helping).
	MsgClaim
	// MsgGrant gives the helper the offer's units to compute.
	MsgGrant
	// MsgRefuse refuses a claim: the owner computes the units itself.
	MsgRefuse
	// MsgDone says the owner's part is over; Grants lists every offer it
	// granted the recipient, so that any claim it does not list is refused.
	MsgDone
)

// String returns the kind's name.
func (k MsgKind) String() string {
	return [...]string{"progress", "offer", "claim", "grant", "refuse", "done"}[k]
}

// ReassignMsg is one message of in-step reassignment.
type ReassignMsg struct {
	Kind     MsgKind
	From, To int
	// Step is the step the message belongs to.
	Step int
	// Frac and At are a progress report's: the fraction of its work the
	// sender had done at At (time since the step began, its clock).
	Frac float64
	At   time.Duration
	// PerUnit is a progress report's measured mean time per unit (0: none
	// computed yet).
	PerUnit time.Duration
	// Offer names an offer (the owner's sequence number); Span its units.
	Offer int
	Span  Span
	// Grants are a MsgDone's granted offers.
	Grants []Grant
}

// Grant is one granted offer.
type Grant struct {
	Offer int
	Span  Span
}

func (m ReassignMsg) String() string {
	s := fmt.Sprintf("%d→%d %s", m.From, m.To, m.Kind)
	switch m.Kind {
	case MsgProgress:
		s += fmt.Sprintf(" %.2f", m.Frac)
	case MsgOffer, MsgGrant:
		s += fmt.Sprintf(" #%d [%d,%d)", m.Offer, m.Span.Lo, m.Span.Hi)
	case MsgClaim, MsgRefuse:
		s += fmt.Sprintf(" #%d", m.Offer)
	case MsgDone:
		for _, g := range m.Grants {
			s += fmt.Sprintf(" #%d", g.Offer)
		}
	}
	return s
}

// offer states, on the owner's side.
const (
	offerPending = iota
	offerGranted
	offerWithdrawn
)

type ownedOffer struct {
	to    int
	span  Span
	state int
}

// heldOffer is an offer on the helper's side.
type heldOffer struct {
	owner, id int
	span      Span
	claimed   bool
}

// Reassigner is one rank's side of in-step reassignment for one step. It
// reads no clock: the caller passes the time since the step began with
// each event, starts the units Start names, reports each with Finish,
// hands it the messages addressed to it (Receive) and sends those Ready
// returns. Not safe for concurrent use.
type Reassigner struct {
	cfg           ReassignConfig
	rank, n, step int
	expect        time.Duration
	own           int    // own units at the start
	mine          []Span // own units still to compute, ascending
	offers        []ownedOffer
	granted       []Span // units granted to this rank still to compute
	held          []heldOffer
	known         map[[2]int]bool // (owner, offer) whose fate is known
	claim         bool            // a claim is unanswered
	busy          bool
	computed      []int
	reported      int
	ownerDone     bool
	helpeesDone   map[int]bool
	out           []ReassignMsg
	moved         int
	startedAt     time.Duration
	current       int                   // the unit started last
	spent         time.Duration         // compute time of the units computed
	helperPer     map[int]time.Duration // a helper's last reported time per unit
}

// NewReassigner returns rank's side of step for a world whose shares are
// shares; expect is the step's expected compute time, which scales the
// time between a report and its reading (FlexRR's current average).
func NewReassigner(cfg ReassignConfig, rank, step int, shares []int, expect time.Duration) (*Reassigner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rank < 0 || rank >= len(shares) || expect <= 0 {
		return nil, fmt.Errorf("straggler: reassigner rank %d of %d, expect %v: %w", rank, len(shares), expect, ErrInvalidConfig)
	}
	var span Span
	for q, sh := range shares[:rank+1] {
		k := (max(sh, 0) + cfg.UnitSize - 1) / cfg.UnitSize
		if q < rank {
			span.Lo += k
		}
		span.Hi = span.Lo + k
	}
	r := &Reassigner{cfg: cfg, rank: rank, n: len(shares), step: step, expect: expect, own: span.Len(),
		known: map[[2]int]bool{}, helpeesDone: map[int]bool{}, helperPer: map[int]time.Duration{}}
	if r.own > 0 {
		r.mine = []Span{span}
	}
	for _, h := range r.Helpees() {
		r.helpeesDone[h] = false
	}
	if r.own == 0 {
		r.report(0) // free from the start: its helpees may offer at once
	}
	r.checkOwnerDone()
	return r, nil
}

func (r *Reassigner) groupSize() int { return min(r.cfg.Helpers, r.n-1) }

// Helpers are the ranks this rank may offer work to.
func (r *Reassigner) Helpers() []int {
	var hs []int
	for i := 1; i <= r.groupSize(); i++ {
		hs = append(hs, (r.rank+i)%r.n)
	}
	return hs
}

// Helpees are the ranks this rank may help: its progress goes to them.
func (r *Reassigner) Helpees() []int {
	var hs []int
	for i := 1; i <= r.groupSize(); i++ {
		hs = append(hs, (r.rank-i+r.n)%r.n)
	}
	slices.Sort(hs)
	return hs
}

func spanUnits(ss []Span) int {
	t := 0
	for _, s := range ss {
		t += s.Len()
	}
	return t
}

// left is what this rank has still to compute or may yet compute: its own
// units, its pending offers and its grants.
func (r *Reassigner) left() int {
	t := spanUnits(r.mine) + spanUnits(r.granted)
	for _, o := range r.offers {
		if o.state == offerPending {
			t += o.span.Len()
		}
	}
	return t
}

// frac is the fraction of its work the rank has done.
func (r *Reassigner) frac() float64 {
	d := len(r.computed)
	if l := r.left(); d+l > 0 {
		return float64(d) / float64(d+l)
	}
	return 1
}

func (r *Reassigner) send(m ReassignMsg) {
	m.From, m.Step = r.rank, r.step
	r.out = append(r.out, m)
}

// Start names the unit the rank computes next and marks it started (ok
// false: none now — the rank waits for a message or is done). Own units
// come first, then an offer taken back, then granted units.
func (r *Reassigner) Start(now time.Duration) (unit int, ok bool) {
	if r.busy {
		return 0, false
	}
	if len(r.mine) == 0 {
		r.withdraw()
	}
	switch {
	case len(r.mine) > 0:
		unit = r.mine[0].Lo
		if r.mine[0].Lo++; r.mine[0].Len() == 0 {
			r.mine = r.mine[1:]
		}
	case len(r.granted) > 0:
		unit = r.granted[0].Lo
		if r.granted[0].Lo++; r.granted[0].Len() == 0 {
			r.granted = r.granted[1:]
		}
	default:
		r.maybeClaim()
		return 0, false
	}
	r.busy, r.startedAt, r.current = true, now, unit
	r.maybeClaim()
	return unit, true
}

// withdraw takes back the pending offer nearest the owner's position.
func (r *Reassigner) withdraw() {
	best := -1
	for i, o := range r.offers {
		if o.state == offerPending && (best < 0 || o.span.Lo < r.offers[best].span.Lo) {
			best = i
		}
	}
	if best >= 0 {
		r.offers[best].state = offerWithdrawn
		r.mine = append(r.mine, r.offers[best].span)
	}
}

// Finish records that the unit started last is computed, at now; any
// other unit is an error.
func (r *Reassigner) Finish(unit int, now time.Duration) error {
	if !r.busy || unit != r.current {
		return fmt.Errorf("straggler: rank %d finished unit %d, started %d (busy %v): %w", r.rank, unit, r.current, r.busy, ErrInvalidConfig)
	}
	r.busy = false
	r.spent += now - r.startedAt
	r.computed = append(r.computed, unit)
	r.report(now)
	r.checkOwnerDone()
	return nil
}

// report sends a progress report at every ReportEvery of the rank's work.
func (r *Reassigner) report(now time.Duration) {
	f := r.frac()
	step := int(math.Floor(f/r.cfg.ReportEvery + 1e-9))
	if step <= r.reported {
		return
	}
	r.reported = step
	for _, h := range r.Helpees() {
		r.send(ReassignMsg{Kind: MsgProgress, To: h, Frac: f, At: now, PerUnit: r.perUnit()})
	}
}

func (r *Reassigner) checkOwnerDone() {
	if r.ownerDone || r.busy || len(r.mine) > 0 {
		return
	}
	for _, o := range r.offers {
		if o.state == offerPending {
			return
		}
	}
	r.ownerDone = true
	for _, h := range r.Helpers() {
		var gs []Grant
		for i, o := range r.offers {
			if o.state == offerGranted && o.to == h {
				gs = append(gs, Grant{Offer: i, Span: o.span})
			}
		}
		r.send(ReassignMsg{Kind: MsgDone, To: h, Grants: gs})
	}
}

// maybeClaim claims the oldest unclaimed offer once the rank has at most
// ClaimAhead units of its own and granted work left and no claim waits.
func (r *Reassigner) maybeClaim() {
	if r.claim || spanUnits(r.mine)+spanUnits(r.granted) > r.cfg.ClaimAhead {
		return
	}
	for _, o := range r.offers {
		if o.state == offerPending {
			return // its own offers come back to it first
		}
	}
	for i := range r.held {
		h := &r.held[i]
		if !h.claimed && !r.known[[2]int{h.owner, h.id}] {
			h.claimed, r.claim = true, true
			r.send(ReassignMsg{Kind: MsgClaim, To: h.owner, Offer: h.id})
			return
		}
	}
}

// offer offers helper up to size units from the end of the owner's own
// units, keeping one for itself.
func (r *Reassigner) offer(helper, size int) {
	if r.ownerDone || len(r.mine) == 0 {
		return
	}
	last := &r.mine[len(r.mine)-1]
	size = min(size, spanUnits(r.mine)-1, last.Len())
	if size < 1 {
		return
	}
	sp := Span{Lo: last.Hi - size, Hi: last.Hi}
	if last.Hi -= size; last.Len() == 0 {
		r.mine = r.mine[:len(r.mine)-1]
	}
	r.offers = append(r.offers, ownedOffer{to: helper, span: sp})
	r.send(ReassignMsg{Kind: MsgOffer, To: helper, Offer: len(r.offers) - 1, Span: sp})
}

// perUnit is the rank's mean time per unit so far; before its first, the
// step's expected compute time over its own units (0: it has none).
func (r *Reassigner) perUnit() time.Duration {
	if len(r.computed) == 0 {
		if r.own == 0 {
			return 0
		}
		return r.expect / time.Duration(r.own)
	}
	return r.spent / time.Duration(len(r.computed))
}

// pays reports whether granting helper the units of o is expected to end
// them no later than the owner would: the helper computes them (after up
// to ClaimAhead units of its own) at its reported pace, the owner after
// the units it holds at its own. Unknown paces pay (FlexRR's rule).
func (r *Reassigner) pays(helper int, o ownedOffer) bool {
	hp, op := r.helperPer[helper], r.perUnit()
	if hp == 0 || op == 0 {
		return true
	}
	return time.Duration(r.cfg.ClaimAhead+o.span.Len())*hp <= time.Duration(spanUnits(r.mine)+o.span.Len())*op
}

func (r *Reassigner) initial() int { return max(1, int(math.Ceil(r.cfg.Initial*float64(r.own)))) }

func (r *Reassigner) pendingTo(h int) bool {
	for _, o := range r.offers {
		if o.to == h && o.state == offerPending {
			return true
		}
	}
	return false
}

// Receive takes a message addressed to this rank, at now. A message of
// another step is refused with an error: the caller keeps a later step's
// until it gets there and drops an earlier one's (that step is over, its
// units all accounted for).
func (r *Reassigner) Receive(m ReassignMsg, now time.Duration) error {
	if m.Step != r.step || m.To != r.rank || m.From < 0 || m.From >= r.n {
		return fmt.Errorf("straggler: rank %d step %d got %v of step %d: %w", r.rank, r.step, m, m.Step, ErrInvalidConfig)
	}
	switch m.Kind {
	case MsgProgress:
		if !slices.Contains(r.Helpers(), m.From) {
			return nil
		}
		if m.PerUnit > 0 {
			r.helperPer[m.From] = m.PerUnit
		}
		if r.pendingTo(m.From) {
			return nil
		}
		diff := m.Frac - r.frac() + float64(now-m.At)/float64(r.expect)
		if diff > r.cfg.Trigger {
			r.offer(m.From, r.initial())
		}
	case MsgOffer:
		if r.helpeesDone[m.From] {
			r.known[[2]int{m.From, m.Offer}] = true // late: its Done said it was not granted
		}
		if !r.known[[2]int{m.From, m.Offer}] {
			r.held = append(r.held, heldOffer{owner: m.From, id: m.Offer, span: m.Span})
		}
		r.maybeClaim()
	case MsgClaim:
		if m.Offer < 0 || m.Offer >= len(r.offers) || r.offers[m.Offer].to != m.From {
			return fmt.Errorf("straggler: rank %d: claim %v names no offer to %d: %w", r.rank, m, m.From, ErrInvalidConfig)
		}
		o := &r.offers[m.Offer]
		if o.state == offerPending && !r.pays(m.From, *o) {
			o.state = offerWithdrawn
			r.mine = append(r.mine, o.span)
		}
		if o.state != offerPending {
			r.send(ReassignMsg{Kind: MsgRefuse, To: m.From, Offer: m.Offer})
			return nil
		}
		o.state = offerGranted
		r.moved += o.span.Len()
		r.send(ReassignMsg{Kind: MsgGrant, To: m.From, Offer: m.Offer, Span: o.span})
		r.offer(m.From, 2*r.initial())
		r.checkOwnerDone()
	case MsgGrant:
		r.take(m.From, m.Offer, m.Span)
	case MsgRefuse:
		r.resolve(m.From, m.Offer)
	case MsgDone:
		for _, g := range m.Grants {
			r.take(m.From, g.Offer, g.Span)
		}
		for _, h := range r.held {
			if h.owner == m.From {
				r.resolve(h.owner, h.id)
			}
		}
		r.helpeesDone[m.From] = true
		r.maybeClaim()
	}
	return nil
}

// take adds a granted offer's units once, whichever message says so first.
func (r *Reassigner) take(owner, id int, sp Span) {
	if r.known[[2]int{owner, id}] {
		return
	}
	r.granted = append(r.granted, sp)
	r.resolve(owner, id)
}

// resolve notes an offer's fate; the claim on it, if any, is answered.
func (r *Reassigner) resolve(owner, id int) {
	k := [2]int{owner, id}
	if r.known[k] {
		return
	}
	r.known[k] = true
	for _, h := range r.held {
		if h.owner == owner && h.id == id && h.claimed {
			r.claim = false
		}
	}
	r.maybeClaim()
}

// Ready returns the messages to send and forgets them.
func (r *Reassigner) Ready() []ReassignMsg {
	out := r.out
	r.out = nil
	return out
}

// Done reports whether the rank's step is over: its own part done, its
// grants computed, its claims answered and every helpee done.
func (r *Reassigner) Done() bool {
	if !r.ownerDone || r.busy || r.claim || spanUnits(r.granted) > 0 {
		return false
	}
	for _, d := range r.helpeesDone {
		if !d {
			return false
		}
	}
	return true
}

// Computed returns the units this rank computed, in order: its
// contribution to the step's sum.
func (r *Reassigner) Computed() []int { return slices.Clone(r.computed) }

// Moved is how many of this rank's units it granted to helpers.
func (r *Reassigner) Moved() int { return r.moved }
