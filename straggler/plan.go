package straggler

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Mode is how a step reduces.
type Mode int

const (
	// ModeRing is the plain ring over every rank (BSP).
	ModeRing Mode = iota
	// ModeOverlap is the exact mode (StragglAR): the rank predicted to
	// arrive last (Plan.Late) joins a reduction the others have already
	// reduce-scattered among themselves; the result is the same sum.
	ModeOverlap
	// ModeEvict takes the evicted ranks out of the ring: each computes at
	// its own pace as the child of a parent (a member) that folds what the
	// child has sent into its contribution, and sends it fresh parameters;
	// a child's gradients are folded within Plan.Staleness steps, none is
	// dropped. Not exact: a child's gradients are stale, and the rows of
	// the steps it skips are not trained on (STAR).
	ModeEvict
	// ModeExclude takes the evicted ranks out of the ring and gives their
	// rows to the members (a child's share is 0): every step applies the
	// whole global batch, fresh, as synchronous SGD does — the exact way
	// to leave a rank behind a slow link, or one stalled, out of the
	// ring. A child computes nothing; it follows the members' decisions
	// (its parent forwards every report) and gets their whole state when
	// it rejoins or training ends.
	ModeExclude
)

// String returns "ring", "overlap", "evict" or "exclude".
func (m Mode) String() string {
	switch m {
	case ModeRing:
		return "ring"
	case ModeOverlap:
		return "overlap"
	case ModeEvict:
		return "evict"
	case ModeExclude:
		return "exclude"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// MarshalText encodes the mode as its name.
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// Edge makes Child an evicted rank whose gradients Parent folds. With Must,
// the parent waits for one this step: the child's last gradient was folded
// Plan.Staleness steps ago.
type Edge struct {
	Child  int  `json:"child"`
	Parent int  `json:"parent"`
	Must   bool `json:"must,omitempty"`
}

// RankClass pairs a rank with its AntDT class.
type RankClass struct {
	Rank  int   `json:"rank"`
	Class Class `json:"class"`
}

// ModeCost is one mode the policy weighed: its predicted step time T (the
// slowest member's arrival plus the reduction), the samples B a step
// applies (children's at the rate they keep up), and STAR Eq. 3's cost
// (1 + φ/B)·T, seconds.
type ModeCost struct {
	Mode    Mode          `json:"mode"`
	Evicted []int         `json:"evicted,omitempty"`
	Late    int           `json:"late,omitempty"`
	Time    time.Duration `json:"time_ns"`
	Samples float64       `json:"samples"`
	Cost    float64       `json:"cost"`
}

// Plan is the decision for one step, identical on every member. Plans are
// plain data: the driver executes them, loggers print them, tests compare
// their dumps. They are never modified once made, and a plan's slices may
// be another plan's too (a Policy shares Members, Shares, PerSample and
// Predicted while they are unchanged): read them, never write them.
type Plan struct {
	// Step is the step the plan governs; DecidedAt the step whose report
	// produced it (−1 for the initial plan).
	Step      int `json:"step"`
	DecidedAt int `json:"decided_at"`
	// Mode is how the step reduces.
	Mode Mode `json:"mode"`
	// Members are the ranks in the ring, ascending.
	Members []int `json:"members"`
	// Late is the rank the exact mode waits for last (ModeOverlap), else −1.
	Late int `json:"late"`
	// Evicted are the children, ascending; Parents gives each its parent,
	// ordered by child.
	Evicted []int  `json:"evicted,omitempty"`
	Parents []Edge `json:"parents,omitempty"`
	// WaitUntil is when, from a member's step start, parents stop waiting
	// for children that have sent nothing yet: the slowest member's
	// predicted arrival (the ring cannot start earlier anyway).
	WaitUntil time.Duration `json:"wait_until_ns,omitempty"`
	// Staleness is K: a child's gradients are folded at least every K
	// steps (its edge is Must when K steps have passed without one),
	// chosen from its predicted cycle.
	Staleness int `json:"staleness,omitempty"`
	// Budget is the compute time every rank spends (0: none; compute the
	// share whatever it takes).
	Budget time.Duration `json:"budget_ns,omitempty"`
	// Shares are the samples each rank takes per iteration (a child's: per
	// its own iteration), summing to the global batch.
	Shares []int `json:"shares"`
	// PerSample is the predicted compute time of one sample, by rank (0:
	// not yet measured).
	PerSample []time.Duration `json:"per_sample_ns"`
	// Predicted is the predicted arrival at the reduction, by rank, under
	// the shares and budget (0: unknown).
	Predicted []time.Duration `json:"predicted_ns"`
	// Collective is the predicted reduction time among every rank.
	Collective time.Duration `json:"collective_ns"`
	// Phi is the gradient noise scale φ the costs were priced with
	// (samples; 0 in the initial plan).
	Phi float64 `json:"phi,omitempty"`
	// Cost is the chosen mode's Eq. 3 cost, seconds (0 when not weighed);
	// Costs lists every mode weighed.
	Cost  float64    `json:"cost"`
	Costs []ModeCost `json:"costs,omitempty"`
	// Reassign says the step runs under in-step work reassignment (set
	// only under Config.Reassign, in a plan whose every rank is in the
	// ring); Surprise is the smoothed surprise it was decided on
	// (Config.ReassignAt).
	Reassign bool    `json:"reassign,omitempty"`
	Surprise float64 `json:"surprise,omitempty"`
	// Stragglers are the ranks predicted to arrive more than Threshold
	// after the fastest.
	Stragglers []int `json:"stragglers,omitempty"`
	// Classes lists ranks whose AntDT class is not none.
	Classes []RankClass `json:"classes,omitempty"`
}

// Dump returns the plan as one line of JSON; equal plans give
// byte-identical dumps.
func (p Plan) Dump() []byte {
	b, err := json.Marshal(p)
	if err != nil {
		// Plan holds only numbers, slices and text marshalers that cannot
		// fail; reaching this is a programming error.
		panic(fmt.Sprintf("straggler: marshalling plan: %v", err))
	}
	return b
}

// String is a one-line summary for logs.
func (p Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "step %d: %s", p.Step, p.Mode)
	switch p.Mode {
	case ModeEvict:
		fmt.Fprintf(&b, " %v staleness≤%d", p.Evicted, p.Staleness)
	case ModeExclude:
		fmt.Fprintf(&b, " %v", p.Evicted)
	case ModeOverlap:
		fmt.Fprintf(&b, " late=%d", p.Late)
	}
	if p.Budget > 0 {
		fmt.Fprintf(&b, " budget=%v", p.Budget)
	}
	if len(p.Shares) <= 16 {
		fmt.Fprintf(&b, " shares=%v", p.Shares)
	}
	return b.String()
}

// ParentOf returns rank's parent under the plan, if it is evicted
// (Parents are ordered by child).
func (p Plan) ParentOf(rank int) (int, bool) {
	if i, ok := slices.BinarySearchFunc(p.Parents, rank, func(e Edge, r int) int { return e.Child - r }); ok {
		return p.Parents[i].Parent, true
	}
	return 0, false
}

// Children returns the edges whose parent is rank, by child.
func (p Plan) Children(rank int) []Edge {
	var out []Edge
	for _, e := range p.Parents {
		if e.Parent == rank {
			out = append(out, e)
		}
	}
	return out
}

// IsMember reports whether rank is in the ring (Members are ascending).
func (p Plan) IsMember(rank int) bool {
	_, ok := slices.BinarySearch(p.Members, rank)
	return ok
}
