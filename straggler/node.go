package straggler

import (
	"fmt"
	"slices"
	"time"
)

// Role is what a rank does in a step.
type Role int

const (
	// RoleMember is a ring member without children.
	RoleMember Role = iota
	// RoleParent is a ring member that folds children's gradients.
	RoleParent
	// RoleChild is an evicted rank computing at its own pace.
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

// CallKind is the collective a member step makes.
type CallKind int

const (
	// CallRing reduces over every rank (the plain ring, BSP).
	CallRing CallKind = iota
	// CallAmong reduces over Call.Members only.
	CallAmong
	// CallTree is STAR's parent tree: each parent first folds its
	// children's gradients (until Call.WaitUntil after the step's start,
	// or until one comes on a Must edge), then the members reduce.
	CallTree
	// CallLate is the exact overlap (StragglAR): the others
	// reduce-scatter while Call.Late is still computing.
	CallLate
)

// String returns "ring", "among", "tree" or "late".
func (k CallKind) String() string {
	switch k {
	case CallRing:
		return "ring"
	case CallAmong:
		return "among"
	case CallTree:
		return "tree"
	case CallLate:
		return "late"
	}
	return fmt.Sprintf("CallKind(%d)", int(k))
}

// Call is the Sum reduction of a member step: plain data the I/O loop
// turns into one collective.
type Call struct {
	Kind CallKind
	// Members are the ranks reducing, ascending (CallRing and CallLate
	// reduce over every rank; Members may then be nil).
	Members []int
	// Edges are the parent edges of CallTree.
	Edges []Edge
	// WaitUntil is, for CallTree, how long after its step start a parent
	// folds children that have sent nothing yet.
	WaitUntil time.Duration
	// Late is the late rank of CallLate, else −1.
	Late int
}

// StateFlags say what a state message (parameters and optimizer state,
// down from a parent to a child) is.
type StateFlags int

const (
	// StateFull: every part of the state, not only the parameters.
	StateFull StateFlags = 1
	// StateRejoin: the child is a member from this version on.
	StateRejoin StateFlags = 2
	// StateFinal: training is over; the child flushes.
	StateFinal StateFlags = 4
)

// StatePost is one state message a member sends before its reduction.
type StatePost struct {
	// To is the child (or rejoining rank).
	To int
	// Version is the step whose parameters the state holds: every update
	// before it is applied.
	Version int
	// Flags say what the state is.
	Flags StateFlags
	// Wait says the message must go even if the previous state to To is
	// still on its way (wait for it): a rejoin or final state, or a state
	// for a child the step must hear from (its edge is Must, and it stops
	// sending after two gradients without a state). Otherwise a busy link
	// skips the post: the child stays owed and gets the newest state once
	// the link is free (report it with MemberOutcome.Unsent).
	Wait bool
}

// Ready is what a rank does in its next iteration, in raft's manner: the
// Node says, the I/O loop (the live driver, the simulator) does, then
// feeds back what came of it (Advance). Role says which half applies.
type Ready struct {
	// Step is, for a member, the step it reduces; for a child, the version
	// of the parameters its gradient is computed on.
	Step int
	// Role is the rank's role in the iteration.
	Role Role
	// Plan is the plan of the member step.
	Plan Plan
	// Share is the samples the rank computes in the iteration.
	Share int

	// Member, in this order: post States (a busy link may skip one
	// without Wait), fold Drain's gradients up to their markers (ranks
	// that have just rejoined: what they sent as children), make Call,
	// then Advance with the reduced report and forward it (the report's
	// payload-free tail) to MemberOutcome.Forward.
	States []StatePost
	Drain  []int
	Call   Call

	// Child: post the gradient (its child report carrying Step as the
	// version) to Parent, then take whatever the parent sent (Receive):
	// with Await, wait for one state first — two gradients are
	// unanswered, and a child on a slow link must not pile up gradients
	// on stale parameters. An Idle child (ModeExclude: its rows are the
	// members') computes and posts nothing: it waits for the next message
	// its parent sends (a report or a state) and takes what came.
	Parent int
	Await  bool
	Idle   bool
}

// MemberOutcome is what a member step's reduction brought back.
type MemberOutcome struct {
	// Report is the step's reduced report.
	Report Report
	// Unsent are the children whose state the step did not post (their
	// link was busy): they stay owed one.
	Unsent []int
}

// MemberResult is what the Node made of a member step.
type MemberResult struct {
	// Next is the plan of the next member step.
	Next Plan
	// Forward are the children of this rank in the step: each gets the
	// step's report, so that its policy decides what the members decide.
	Forward []int
	// Evicted says this rank computes as a child from the next step.
	Evicted bool
}

// Adoption is what a state message meant to a child.
type Adoption struct {
	// Take says the state is newer than the one held: copy it in.
	Take bool
	// Full says every part came (else the parameters alone).
	Full bool
	// Done says training is over for the child: flush next.
	Done bool
	// Rejoin says the child is a member again: replay the reports that
	// have come, then call Rejoined.
	Rejoin bool
}

// Decider decides plans from reports: *Policy. A simulator whose ranks all
// hold the same reports may share one Decider among many Nodes, each
// step's report decided once.
type Decider interface {
	// Config is the policy configuration in effect.
	Config() Config
	// Plan is the plan of the next step before any report.
	Plan() Plan
	// Observe takes the report of the step the current plan governs and
	// returns the plan of the next.
	Observe(rep Report) (Plan, error)
}

var _ Decider = (*Policy)(nil)

// Node is one rank's straggler step protocol, pure, in etcd raft's shape:
// it takes what came back and says what to do next. The live driver
// (straggler/driver), the simulator (sim) and the scenario scripts step
// the same Node; none of them holds protocol state of its own.
//
// The protocol: members reduce each step under the plan every member
// decides alike from the step's report (Decider). A parent folds its
// children's gradients into its contribution (CallTree), owes each child
// whose gradient it folded the newest parameters, and forwards each step's
// report to its children, whose own Decider replays it. A child posts a
// gradient per iteration, computed on the newest parameters it holds, and
// waits for a state when two are unanswered. A rank the plan readmits gets
// the whole state (StateRejoin) at the next member step's start; its
// parent first folds every gradient it sent as a child, up to its marker.
// At the end (Flush) every child gets the final state, every pending
// gradient is folded, and one reduction over every rank sums them.
//
// A Node reads no clock, starts no goroutine and does no I/O; it is owned
// by one goroutine.
type Node struct {
	rank   int
	world  int
	dec    Decider
	plan   Plan // the plan of the next member step
	batch  int
	parent int // a child's parent, kept after it rejoins

	// As a parent: children owed parameters (their gradient was folded),
	// ranks owed a rejoin state, and former children whose last gradients
	// (up to their marker) are still to be folded.
	owed          []int
	rejoiner      []int
	pendingRejoin []int

	// As a child: the version of the parameters held and the gradients
	// posted since the last state taken.
	version int
	unacked int
	done    bool
}

// NewNode returns the Node of rank, whose first step runs dec's initial
// plan.
func NewNode(rank int, dec Decider) (*Node, error) {
	cfg := dec.Config()
	if rank < 0 || rank >= cfg.World {
		return nil, fmt.Errorf("straggler: node of rank %d in a world of %d: %w", rank, cfg.World, ErrInvalidConfig)
	}
	return &Node{rank: rank, world: cfg.World, dec: dec, plan: dec.Plan(), batch: cfg.GlobalBatch, parent: -1}, nil
}

// Rank returns the node's rank.
func (n *Node) Rank() int { return n.rank }

// Plan returns the plan of the next member step.
func (n *Node) Plan() Plan { return n.plan }

// Role returns the rank's role in its next iteration.
func (n *Node) Role() Role {
	if _, ok := n.plan.ParentOf(n.rank); ok {
		return RoleChild
	}
	if len(n.plan.Children(n.rank)) > 0 {
		return RoleParent
	}
	return RoleMember
}

// Next returns the step whose batch the next iteration computes: a
// member's next step, or the version of the parameters a child holds.
func (n *Node) Next() int {
	if n.Role() == RoleChild {
		return n.version
	}
	return n.plan.Step
}

// Done reports whether a child has taken the final state.
func (n *Node) Done() bool { return n.done }

// Parent returns the rank a child exchanges with. A former child keeps
// its last parent (its marker goes there; the member's plan no longer
// names one); a rank that was never a child gets −1.
func (n *Node) Parent() int {
	if p, ok := n.plan.ParentOf(n.rank); ok {
		return p
	}
	return n.parent
}

// Ready returns what the rank does in its next iteration (see Ready).
// For a member it takes the states and drains owed so far: what Ready
// returns is the step's to do.
func (n *Node) Ready() Ready {
	p := n.plan
	rd := Ready{Step: p.Step, Role: n.Role(), Plan: p, Share: p.Shares[n.rank], Parent: -1}
	if rd.Role == RoleChild {
		parent, _ := p.ParentOf(n.rank)
		n.parent = parent
		rd.Step, rd.Parent = n.version, parent
		if p.Mode == ModeExclude {
			rd.Idle, rd.Share = true, 0
		} else {
			rd.Await = n.unacked+1 >= 2
		}
		return rd
	}
	rd.Call = callOf(p)
	for _, c := range n.rejoiner {
		rd.States = append(rd.States, StatePost{To: c, Version: p.Step, Flags: StateFull | StateRejoin, Wait: true})
	}
	n.rejoiner = n.rejoiner[:0]
	for _, c := range slices.Compact(slices.Sorted(slices.Values(n.owed))) {
		if parent, ok := p.ParentOf(c); ok && parent == n.rank {
			rd.States = append(rd.States, StatePost{To: c, Version: p.Step, Wait: n.mustHear(c)})
		}
	}
	n.owed = n.owed[:0]
	rd.Drain, n.pendingRejoin = n.pendingRejoin, nil
	return rd
}

// callOf is the reduction a plan makes its members run.
func callOf(p Plan) Call {
	switch {
	case p.Mode == ModeEvict:
		return Call{Kind: CallTree, Members: p.Members, Edges: p.Parents, WaitUntil: p.WaitUntil, Late: -1}
	case p.Mode == ModeExclude:
		return Call{Kind: CallAmong, Members: p.Members, Late: -1}
	case p.Mode == ModeOverlap && p.Late >= 0:
		return Call{Kind: CallLate, Members: p.Members, Late: p.Late}
	case len(p.Members) == len(p.Shares):
		return Call{Kind: CallRing, Members: p.Members, Late: -1}
	}
	return Call{Kind: CallAmong, Members: p.Members, Late: -1}
}

// mustHear reports whether the plan makes this rank wait for a gradient
// from child c (its staleness bound is reached).
func (n *Node) mustHear(c int) bool {
	for _, e := range n.plan.Parents {
		if e.Child == c && e.Parent == n.rank && e.Must {
			return true
		}
	}
	return false
}

// AdvanceMember takes the outcome of the member step Ready described: the
// reduced report decides the next plan; children whose gradients this
// rank folded are owed parameters; children the next plan readmits are
// owed the whole state and their last gradients are drained at the next
// step.
func (n *Node) AdvanceMember(out MemberOutcome) (MemberResult, error) {
	p := n.plan
	rep := out.Report
	if rep.Step != p.Step {
		return MemberResult{}, fmt.Errorf("straggler: rank %d: report of step %d for member step %d: %w", n.rank, rep.Step, p.Step, ErrOutOfOrder)
	}
	if len(rep.Child) != n.world {
		return MemberResult{}, fmt.Errorf("straggler: rank %d: report of step %d has %d child entries for %d ranks: %w", n.rank, rep.Step, len(rep.Child), n.world, ErrInvalidConfig)
	}
	var res MemberResult
	for _, e := range p.Parents {
		if e.Parent == n.rank && rep.Child[e.Child].Count > 0 {
			n.owed = append(n.owed, e.Child)
		}
	}
	n.owed = append(n.owed, out.Unsent...)
	next, err := n.dec.Observe(rep)
	if err != nil {
		return res, fmt.Errorf("straggler: rank %d: %w", n.rank, err)
	}
	for _, e := range p.Children(n.rank) {
		res.Forward = append(res.Forward, e.Child)
		if next.IsMember(e.Child) {
			n.rejoiner = append(n.rejoiner, e.Child)
			n.pendingRejoin = append(n.pendingRejoin, e.Child)
		}
	}
	if !next.IsMember(n.rank) && p.IsMember(n.rank) {
		// Evicted: the parameters this rank holds have every step up to
		// this one applied, so its gradients are of the next step's
		// version until a newer state comes.
		n.version, n.unacked, res.Evicted = next.Step, 0, true
	}
	n.plan, res.Next = next, next
	return res, nil
}

// Folded returns the number of child gradients a report says were folded
// and their mean staleness in steps.
func (r Report) Folded() (count int, staleness float64) {
	sum := 0.0
	for _, c := range r.Child {
		count += c.Count
		sum += c.Staleness(r.Step) * float64(c.Count)
	}
	if count > 0 {
		staleness = sum / float64(count)
	}
	return count, staleness
}

// AdvanceChild records that the child posted the gradient Ready described.
func (n *Node) AdvanceChild() { n.unacked++ }

// ExpectReport returns the parent whose forwarded report the child takes
// next, and that report's step.
func (n *Node) ExpectReport() (from, step int) { return n.Parent(), n.plan.Step }

// Replay feeds a report the parent forwarded (the step ExpectReport
// names): the child's Decider decides what the members decided.
func (n *Node) Replay(rep Report) error {
	if rep.Step != n.plan.Step {
		return fmt.Errorf("straggler: rank %d: forwarded report of step %d, expected %d: %w", n.rank, rep.Step, n.plan.Step, ErrOutOfOrder)
	}
	next, err := n.dec.Observe(rep)
	if err != nil {
		return fmt.Errorf("straggler: rank %d: %w", n.rank, err)
	}
	n.plan = next
	return nil
}

// MustAwait reports whether a child must wait for a state now: the
// replayed reports readmit it, and it needs the members' whole state
// before its first member step (no state before that one will do).
func (n *Node) MustAwait() bool { return n.Role() != RoleChild }

// Adopt takes a state message of version with flags from the parent: one
// of the same version or newer is taken (a full state may follow the
// parameters of its version), an older one, overtaken, is not.
func (n *Node) Adopt(version int, flags StateFlags) Adoption {
	if version < n.version {
		return Adoption{} // an older one overtaken by a newer
	}
	n.version, n.unacked = version, 0
	a := Adoption{Take: true, Full: flags&StateFull != 0, Done: flags&StateFinal != 0, Rejoin: flags&StateRejoin != 0}
	if a.Done {
		n.done = true
	}
	return a
}

// Rejoined checks, after a rejoin state of version was adopted and the
// reports before it replayed, that the child is a member of that step.
func (n *Node) Rejoined(version int) error {
	if n.plan.Step != version || n.Role() == RoleChild {
		return fmt.Errorf("straggler: rank %d rejoins at step %d, its policy is at step %d (%s)", n.rank, version, n.plan.Step, n.plan)
	}
	return nil
}

// Marker reports whether a child, after taking what came, sends its
// parent a marker (its last gradient before it rejoins or ends), so that
// the parent folds exactly what it sent.
func (n *Node) Marker() bool { return n.done || n.Role() != RoleChild }

// Flush returns the final step's work: a child still waiting for the
// final state (Ready.Await) takes states until Done and sends its marker;
// a member posts every child (and every rank about to rejoin) the final
// state and drains their gradients up to their markers; then every rank
// makes one reduction over every rank of what was folded (Call). Plan is
// the plan in effect at the end.
func (n *Node) Flush() Ready {
	rd := Ready{Step: n.plan.Step, Role: n.Role(), Plan: n.plan, Call: Call{Kind: CallRing, Late: -1}, Parent: -1}
	if rd.Role == RoleChild {
		rd.Parent, rd.Await = n.Parent(), !n.done
		return rd
	}
	kids := slices.Clone(n.rejoiner)
	for _, e := range n.plan.Children(n.rank) {
		kids = append(kids, e.Child)
		n.pendingRejoin = append(n.pendingRejoin, e.Child)
	}
	for _, c := range kids {
		rd.States = append(rd.States, StatePost{To: c, Version: n.plan.Step, Flags: StateFull | StateFinal, Wait: true})
	}
	n.rejoiner, n.owed = nil, nil
	rd.Drain, n.pendingRejoin = n.pendingRejoin, nil
	return rd
}
