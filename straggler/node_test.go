package straggler

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// The Node's contract, tested with in-memory reports: no sockets, no
// clock, no goroutines. The protocol cases (eviction, states, rejoin,
// flush, stale input) are scripts (testdata/node, TestNodeScripts);
// plannedDecider, a Decider that hands out fixed plans, drives most of
// them. The Go tests here are what a script cannot say: every preset's
// first Ready, plans byte-identical across ranks over many steps, and
// malformed reports.

// plannedDecider returns plans[0] first and plans[i+1] for the report of
// plans[i].Step.
type plannedDecider struct {
	cfg   Config
	plans []Plan
	i     int
}

func (d *plannedDecider) Config() Config { return d.cfg }
func (d *plannedDecider) Plan() Plan     { return d.plans[d.i] }
func (d *plannedDecider) Observe(rep Report) (Plan, error) {
	if rep.Step != d.plans[d.i].Step {
		return d.plans[d.i], fmt.Errorf("planned: report of step %d, want %d: %w", rep.Step, d.plans[d.i].Step, ErrOutOfOrder)
	}
	if d.i+1 >= len(d.plans) {
		return d.plans[d.i], fmt.Errorf("planned: no plan after step %d", rep.Step)
	}
	d.i++
	return d.plans[d.i], nil
}

// ringPlan is a plain ring over n ranks at step.
func ringPlan(step, n, batch int) Plan {
	members := make([]int, n)
	for r := range members {
		members[r] = r
	}
	return Plan{Step: step, DecidedAt: step - 1, Mode: ModeRing, Members: members, Late: -1, Shares: EqualShares(batch, n)}
}

// evictPlan takes the edges' children out of a ring of n ranks under mode
// (ModeEvict or ModeExclude).
func evictPlan(step, n, batch int, mode Mode, edges ...Edge) Plan {
	p := ringPlan(step, n, batch)
	p.Mode, p.Members, p.Parents = mode, nil, edges
	for r := 0; r < n; r++ {
		if _, ok := p.ParentOf(r); ok {
			p.Evicted = append(p.Evicted, r)
		} else {
			p.Members = append(p.Members, r)
		}
	}
	if mode == ModeEvict {
		p.Staleness, p.WaitUntil = 2, 10*time.Millisecond
	} else {
		p.Shares = slices.Clone(p.Shares)
		for _, c := range p.Evicted {
			p.Shares[c] = 0
		}
	}
	return p
}

// noPanic runs f and fails the test if it panics.
func noPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("%s panicked: %v", what, r)
		}
	}()
	f()
}

// A fresh Node is a member of a ring over every rank at step 0 with equal
// shares, and owes no state and drains nothing.
func TestNodeFreshReadyIsAnEqualShareRing(t *testing.T) {
	const n, batch = 4, 64
	for _, name := range []string{NameAdaptive, NameShares, NameSTAR} {
		t.Run(name, func(t *testing.T) {
			p := newPolicy(t, name, n, batch)
			for r := range n {
				nd, err := NewNode(r, p)
				if err != nil {
					t.Fatal(err)
				}
				rd := nd.Ready()
				if rd.Role != RoleMember || nd.Role() != RoleMember || rd.Step != 0 || nd.Next() != 0 {
					t.Fatalf("rank %d: fresh Ready role %s step %d, want member at step 0", r, rd.Role, rd.Step)
				}
				if rd.Call.Kind != CallRing || rd.Plan.Mode != ModeRing || !slices.Equal(rd.Plan.Shares, EqualShares(batch, n)) || rd.Share != batch/n {
					t.Fatalf("rank %d: fresh Ready %+v, want a ring with equal shares of %d", r, rd, batch/n)
				}
				if len(rd.States) != 0 || len(rd.Drain) != 0 || rd.Parent != -1 || rd.Await || rd.Idle {
					t.Fatalf("rank %d: fresh Ready posts %v, drains %v, parent %d", r, rd.States, rd.Drain, rd.Parent)
				}
				if nd.Rank() != r || nd.Parent() != -1 || nd.Done() || !bytes.Equal(nd.Plan().Dump(), p.Plan().Dump()) {
					t.Fatalf("rank %d: fresh node rank %d parent %d done %v", r, nd.Rank(), nd.Parent(), nd.Done())
				}
			}
		})
	}
}

// Every rank steps its own Node and Policy on the same reports (members
// through AdvanceMember, a child through Replay of what its parent
// forwards): every Node holds a byte-identical plan at every step. The
// rank that reaches the reduction 60 ms late is evicted (as in
// TestPolicyEvictsWhatSharesCannotFix): AdvanceMember says so on that rank
// alone, its Ready says child under the plan's parent, and the parent
// forwards it every report and owes it a state for each folded gradient.
func TestNodesFedTheSameReportsPlanAlike(t *testing.T) {
	const n, batch, slow, steps = 4, 64, 1, 12
	nodes := make([]*Node, n)
	for r := range nodes {
		var err error
		if nodes[r], err = NewNode(r, sharesWithStaleEviction(t, n, batch)); err != nil {
			t.Fatal(err)
		}
	}
	tau, extra := durations(1, 1, 1, 1), durations(0, 60, 0, 0)
	evictedAt, childPosts, stateChecks := -1, 0, 0
	for s := 0; s < steps; s++ {
		plan := nodes[0].Plan()
		if plan.Step != s {
			t.Fatalf("node 0 plans step %d, want %d", plan.Step, s)
		}
		rds := make([]Ready, n)
		for r, nd := range nodes {
			rds[r] = nd.Ready()
		}
		rep := report(plan, tau, extra)
		parent, evicted := plan.ParentOf(slow)
		if evicted {
			rd := rds[slow]
			if rd.Role != RoleChild || rd.Parent != parent || nodes[slow].Parent() != parent || nodes[slow].Marker() || nodes[slow].MustAwait() {
				t.Fatalf("step %d: evicted rank's Ready %+v, want a child of %d", s, rd, parent)
			}
			if from, step := nodes[slow].ExpectReport(); from != parent || step != s {
				t.Fatalf("step %d: child expects the report of step %d from %d, want %d from %d", s, step, from, s, parent)
			}
			if rds[parent].Role != RoleParent || rds[parent].Call.Kind != CallTree || !slices.Equal(rds[parent].Call.Edges, plan.Parents) {
				t.Fatalf("step %d: parent's Ready %+v, want a tree call over the plan's edges", s, rds[parent])
			}
			// The child posts a gradient every other step; its parent
			// folds it.
			if s%2 == 0 {
				nodes[slow].AdvanceChild()
				childPosts++
				rep.Child[slow] = ChildReport{Count: 1, Samples: rd.Share, Compute: time.Duration(rd.Share) * time.Millisecond,
					Cycle: 80 * time.Millisecond, Versions: rd.Step}
				rep.Applied += rd.Share
			}
			if s > evictedAt+1 {
				// The previous step folded a gradient iff s−1 was even.
				var owed []int
				for _, st := range rds[parent].States {
					owed = append(owed, st.To)
					if st.Version != s {
						t.Fatalf("step %d: parent posts a state of version %d", s, st.Version)
					}
				}
				if want := (s-1)%2 == 0; want != slices.Equal(owed, []int{slow}) {
					t.Fatalf("step %d: parent posts states to %v (gradient folded at step %d: %v)", s, owed, s-1, want)
				}
				stateChecks++
			}
		}
		for r, nd := range nodes {
			if rds[r].Role == RoleChild {
				continue
			}
			res, err := nd.AdvanceMember(MemberOutcome{Report: rep})
			if err != nil {
				t.Fatalf("step %d rank %d: %v", s, r, err)
			}
			if !bytes.Equal(res.Next.Dump(), nd.Plan().Dump()) {
				t.Fatalf("step %d rank %d: Next differs from Plan()", s, r)
			}
			wantFwd := []int(nil)
			if evicted && r == parent {
				wantFwd = []int{slow}
			}
			if !slices.Equal(res.Forward, wantFwd) {
				t.Fatalf("step %d rank %d: forwards to %v, want %v", s, r, res.Forward, wantFwd)
			}
			if want := r == slow && !res.Next.IsMember(slow); res.Evicted != want {
				t.Fatalf("step %d rank %d: Evicted %v, want %v (next plan %s)", s, r, res.Evicted, want, res.Next)
			}
			if res.Evicted {
				evictedAt = s
			}
		}
		if evicted {
			if err := nodes[slow].Replay(rep); err != nil {
				t.Fatalf("step %d: replay: %v", s, err)
			}
		}
		want := nodes[0].Plan().Dump()
		for r, nd := range nodes {
			if got := nd.Plan().Dump(); !bytes.Equal(got, want) {
				t.Fatalf("after step %d: rank %d's plan differs:\n%s\n%s", s, r, got, want)
			}
		}
	}
	if evictedAt < 0 || childPosts == 0 || stateChecks == 0 {
		t.Fatalf("rank %d never evicted (or never posted): the test proves nothing", slow)
	}
}

// Malformed input is an error, never a panic: a rank outside the world,
// reports without every rank's entries. (Reports of another step, stale
// replays and rejoins the plan does not make are scripts:
// testdata/node/errors.txt.)
func TestNodeRejectsInvalidInput(t *testing.T) {
	const n, batch = 4, 64
	for _, rank := range []int{-1, n, n + 7} {
		noPanic(t, "NewNode", func() {
			if _, err := NewNode(rank, newPolicy(t, NameAdaptive, n, batch)); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("NewNode(%d) in a world of %d: %v", rank, n, err)
			}
		})
	}

	p := newPolicy(t, NameAdaptive, n, batch)
	nd, err := NewNode(0, p)
	if err != nil {
		t.Fatal(err)
	}
	good := report(p.Plan(), durations(1, 1, 1, 1), nil)
	short := good
	short.Current = good.Current[:2]
	for _, tc := range []struct {
		name string
		rep  Report
	}{
		{"zero report", Report{}},
		{"no child entries", Report{Step: 0, Current: good.Current}},
		{"short member entries", short},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noPanic(t, "AdvanceMember", func() {
				if _, err := nd.AdvanceMember(MemberOutcome{Report: tc.rep}); err == nil {
					t.Fatalf("AdvanceMember(%s): no error", tc.name)
				}
			})
			noPanic(t, "Replay", func() {
				if err := nd.Replay(tc.rep); err == nil {
					t.Fatalf("Replay(%s): no error", tc.name)
				}
			})
		})
	}
	// The node is still at step 0: the good report advances it.
	if _, err := nd.AdvanceMember(MemberOutcome{Report: good}); err != nil {
		t.Fatalf("the step-0 report after the malformed ones: %v", err)
	}
}
