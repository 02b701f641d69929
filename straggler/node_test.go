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
// clock, no goroutines. Real Policies drive the side-by-side tests;
// plannedDecider, a Decider that hands out fixed plans, drives the
// protocol cases (eviction, states, rejoin, flush) step by step.

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

// plannedNodes returns one Node per rank, each with its own
// plannedDecider over the same plans.
func plannedNodes(t *testing.T, n, batch int, plans ...Plan) []*Node {
	t.Helper()
	nodes := make([]*Node, n)
	for r := range nodes {
		nd, err := NewNode(r, &plannedDecider{cfg: Config{World: n, GlobalBatch: batch}, plans: plans})
		if err != nil {
			t.Fatal(err)
		}
		nodes[r] = nd
	}
	return nodes
}

// stepReport is the report of plan's step with member entries for its
// members and child[c] gradients folded from child c.
func stepReport(plan Plan, child map[int]int) Report {
	rep := report(plan, make([]time.Duration, len(plan.Shares)), nil)
	for c, count := range child {
		rep.Child[c] = ChildReport{Count: count, Samples: count * plan.Shares[c], Versions: count * plan.Step}
		rep.Applied += count * plan.Shares[c]
	}
	return rep
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

// A child's Ready: a gradient computed on the version it holds (the step
// after its eviction until a state comes), posted to its parent; with one
// gradient unanswered the next post awaits a state; a state resets that.
// An exclude-mode child is Idle and computes nothing.
func TestNodeChildPostsAndAwaits(t *testing.T) {
	const n, batch = 4, 64
	edge := Edge{Child: 3, Parent: 1}
	nodes := plannedNodes(t, n, batch, ringPlan(0, n, batch), evictPlan(1, n, batch, ModeEvict, edge), evictPlan(2, n, batch, ModeEvict, edge), evictPlan(3, n, batch, ModeEvict, edge))
	child := nodes[3]
	res, err := child.AdvanceMember(MemberOutcome{Report: stepReport(ringPlan(0, n, batch), nil)})
	if err != nil || !res.Evicted {
		t.Fatalf("rank 3 at step 0: %+v, %v; want evicted", res, err)
	}
	rd := child.Ready()
	if rd.Role != RoleChild || rd.Parent != 1 || rd.Step != 1 || child.Next() != 1 || rd.Share != batch/n || rd.Await || rd.Idle {
		t.Fatalf("first child Ready %+v, want a gradient of version 1 to rank 1 without waiting", rd)
	}
	if child.Marker() || child.MustAwait() || child.Done() {
		t.Fatalf("a child: marker %v, must await %v, done %v", child.Marker(), child.MustAwait(), child.Done())
	}
	child.AdvanceChild()
	if rd = child.Ready(); !rd.Await || rd.Step != 1 {
		t.Fatalf("Ready after one unanswered gradient %+v, want Await", rd)
	}
	child.AdvanceChild()
	if a := child.Adopt(2, 0); !a.Take || a.Full || a.Done || a.Rejoin {
		t.Fatalf("Adopt of version 2 (parameters only): %+v", a)
	}
	if rd = child.Ready(); rd.Await || rd.Step != 2 || child.Next() != 2 {
		t.Fatalf("Ready after a state of version 2: %+v, want version 2 without waiting", rd)
	}

	ex := plannedNodes(t, n, batch, ringPlan(0, n, batch), evictPlan(1, n, batch, ModeExclude, edge), evictPlan(2, n, batch, ModeExclude, edge))
	if _, err := ex[3].AdvanceMember(MemberOutcome{Report: stepReport(ringPlan(0, n, batch), nil)}); err != nil {
		t.Fatal(err)
	}
	if rd = ex[3].Ready(); rd.Role != RoleChild || !rd.Idle || rd.Share != 0 || rd.Parent != 1 {
		t.Fatalf("exclude-mode child Ready %+v, want idle with no share", rd)
	}
	if _, err := ex[1].AdvanceMember(MemberOutcome{Report: stepReport(ringPlan(0, n, batch), nil)}); err != nil {
		t.Fatal(err)
	}
	if rd = ex[1].Ready(); rd.Role != RoleParent || rd.Call.Kind != CallAmong || !slices.Equal(rd.Call.Members, []int{0, 1, 2}) {
		t.Fatalf("exclude-mode parent Ready %+v, want a reduction among 0 1 2", rd)
	}
}

// Adopt takes a state only if it is not older than the one held, and says
// what its flags mean.
func TestNodeAdopt(t *testing.T) {
	const n, batch = 4, 64
	edge := Edge{Child: 3, Parent: 1}
	for _, tc := range []struct {
		name    string
		version int
		flags   StateFlags
		want    Adoption
	}{
		{"older", 3, StateFull, Adoption{}},
		{"newer parameters", 7, 0, Adoption{Take: true}},
		{"newer full", 7, StateFull, Adoption{Take: true, Full: true}},
		{"final", 7, StateFull | StateFinal, Adoption{Take: true, Full: true, Done: true}},
		{"rejoin", 7, StateFull | StateRejoin, Adoption{Take: true, Full: true, Rejoin: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := plannedNodes(t, n, batch, ringPlan(0, n, batch), evictPlan(1, n, batch, ModeEvict, edge))
			child := nodes[3]
			if _, err := child.AdvanceMember(MemberOutcome{Report: stepReport(ringPlan(0, n, batch), nil)}); err != nil {
				t.Fatal(err)
			}
			if a := child.Adopt(5, 0); !a.Take {
				t.Fatalf("Adopt(5) at version 1: %+v", a)
			}
			child.AdvanceChild()
			got := child.Adopt(tc.version, tc.flags)
			if got != tc.want {
				t.Fatalf("Adopt(%d, %d) at version 5: %+v, want %+v", tc.version, tc.flags, got, tc.want)
			}
			rd := child.Ready()
			wantVersion := 5
			if tc.want.Take {
				wantVersion = tc.version
			}
			if rd.Step != wantVersion || child.Next() != wantVersion {
				t.Fatalf("after Adopt(%d): child computes on version %d, want %d", tc.version, rd.Step, wantVersion)
			}
			if rd.Await == tc.want.Take {
				t.Fatalf("after Adopt(%d) (taken %v) with one gradient unanswered: Await %v", tc.version, tc.want.Take, rd.Await)
			}
			if child.Done() != tc.want.Done || (tc.want.Done && !child.Marker()) {
				t.Fatalf("after Adopt(%d, %d): done %v, marker %v", tc.version, tc.flags, child.Done(), child.Marker())
			}
		})
	}
}

// The whole cycle on a planned schedule: rank 3 evicted at step 0 under
// rank 0; its gradient folded at step 1 (rank 0 owes it parameters at
// step 2); step 2's report readmits it (ring at step 3). The parent posts
// the rejoin state and drains rank 3 at step 3; the child, having replayed
// the reports, must await that state, sends a marker, adopts it and
// Rejoined makes it a member of step 3 with the members' plan.
func TestNodeEvictionStatesAndRejoin(t *testing.T) {
	const n, batch = 4, 64
	edge := Edge{Child: 3, Parent: 0}
	plans := []Plan{ringPlan(0, n, batch), evictPlan(1, n, batch, ModeEvict, edge), evictPlan(2, n, batch, ModeEvict, edge), ringPlan(3, n, batch), ringPlan(4, n, batch)}
	nodes := plannedNodes(t, n, batch, plans...)
	members := func() []*Node { return nodes[:3] }
	child := nodes[3]
	advance := func(s int, out MemberOutcome) []MemberResult {
		t.Helper()
		var res []MemberResult
		for r, nd := range members() {
			mr, err := nd.AdvanceMember(out)
			if err != nil {
				t.Fatalf("step %d rank %d: %v", s, r, err)
			}
			res = append(res, mr)
		}
		return res
	}

	// Step 0: every rank a member; rank 3 is evicted.
	for r, nd := range nodes {
		rd := nd.Ready()
		if rd.Role != RoleMember || rd.Call.Kind != CallRing {
			t.Fatalf("step 0 rank %d: %+v", r, rd)
		}
	}
	if res, err := child.AdvanceMember(MemberOutcome{Report: stepReport(plans[0], nil)}); err != nil || !res.Evicted {
		t.Fatalf("rank 3 at step 0: %+v, %v; want evicted", res, err)
	}
	for _, mr := range advance(0, MemberOutcome{Report: stepReport(plans[0], nil)}) {
		if mr.Evicted || len(mr.Forward) != 0 {
			t.Fatalf("a member at step 0: %+v", mr)
		}
	}

	// Step 1: rank 0 is rank 3's parent and folds one gradient.
	rd := nodes[0].Ready()
	if rd.Role != RoleParent || rd.Call.Kind != CallTree || rd.Call.WaitUntil != plans[1].WaitUntil || len(rd.States) != 0 || len(rd.Drain) != 0 {
		t.Fatalf("parent at step 1: %+v", rd)
	}
	crd := child.Ready()
	if crd.Role != RoleChild || crd.Parent != 0 || crd.Step != 1 {
		t.Fatalf("child at step 1: %+v", crd)
	}
	child.AdvanceChild()
	res := advance(1, MemberOutcome{Report: stepReport(plans[1], map[int]int{3: 1})})
	if !slices.Equal(res[0].Forward, []int{3}) || len(res[1].Forward) != 0 || len(res[2].Forward) != 0 {
		t.Fatalf("step 1 forwards: %v %v %v, want rank 0 to rank 3", res[0].Forward, res[1].Forward, res[2].Forward)
	}
	if from, step := child.ExpectReport(); from != 0 || step != 1 {
		t.Fatalf("child expects step %d from %d", step, from)
	}
	if err := child.Replay(stepReport(plans[1], map[int]int{3: 1})); err != nil {
		t.Fatal(err)
	}

	// Step 2: rank 0 owes rank 3 the parameters of version 2.
	rd = nodes[0].Ready()
	if want := []StatePost{{To: 3, Version: 2}}; !slices.Equal(rd.States, want) || len(rd.Drain) != 0 {
		t.Fatalf("parent at step 2 posts %v, drains %v; want %v", rd.States, rd.Drain, want)
	}
	if a := child.Adopt(2, 0); !a.Take || a.Full || a.Rejoin {
		t.Fatalf("child adopts version 2: %+v", a)
	}
	if crd = child.Ready(); crd.Step != 2 || crd.Await {
		t.Fatalf("child at version 2: %+v", crd)
	}
	res = advance(2, MemberOutcome{Report: stepReport(plans[2], nil)})
	if !slices.Equal(res[0].Forward, []int{3}) {
		t.Fatalf("step 2 forwards %v", res[0].Forward)
	}
	if child.MustAwait() || child.Marker() {
		t.Fatal("child must await / marks before the readmitting report is replayed")
	}
	if err := child.Replay(stepReport(plans[2], nil)); err != nil {
		t.Fatal(err)
	}
	if !child.MustAwait() || !child.Marker() {
		t.Fatalf("child readmitted by the replayed report: must await %v, marker %v", child.MustAwait(), child.Marker())
	}

	// Step 3: rank 0 posts the rejoin state and drains rank 3.
	rd = nodes[0].Ready()
	if want := []StatePost{{To: 3, Version: 3, Flags: StateFull | StateRejoin, Wait: true}}; !slices.Equal(rd.States, want) || !slices.Equal(rd.Drain, []int{3}) {
		t.Fatalf("parent at step 3 posts %v, drains %v; want %v and drain [3]", rd.States, rd.Drain, want)
	}
	if rd.Role != RoleMember || rd.Call.Kind != CallRing {
		t.Fatalf("rank 0 at step 3: %+v", rd)
	}
	if err := child.Rejoined(2); err == nil {
		t.Fatal("Rejoined at step 2 while the policy is at step 3: no error")
	}
	if a := child.Adopt(3, StateFull|StateRejoin); a != (Adoption{Take: true, Full: true, Rejoin: true}) {
		t.Fatalf("rejoin state: %+v", a)
	}
	if err := child.Rejoined(3); err != nil {
		t.Fatal(err)
	}
	crd = child.Ready()
	if crd.Role != RoleMember || crd.Step != 3 || crd.Call.Kind != CallRing || crd.Share != batch/n || !bytes.Equal(crd.Plan.Dump(), rd.Plan.Dump()) {
		t.Fatalf("rejoined rank 3 at step 3: %+v", crd)
	}
	// A second Ready of rank 0 posts nothing more: Ready took them.
	if rd = nodes[0].Ready(); len(rd.States) != 0 || len(rd.Drain) != 0 {
		t.Fatalf("rank 0's second Ready at step 3 posts %v, drains %v", rd.States, rd.Drain)
	}
}

// A child whose state was not sent (MemberOutcome.Unsent) stays owed one;
// a Must edge makes the post wait.
func TestNodeUnsentStateStaysOwedAndMustWaits(t *testing.T) {
	const n, batch = 4, 64
	edge, must := Edge{Child: 2, Parent: 1}, Edge{Child: 2, Parent: 1, Must: true}
	plans := []Plan{evictPlan(0, n, batch, ModeEvict, edge), evictPlan(1, n, batch, ModeEvict, edge), evictPlan(2, n, batch, ModeEvict, must), evictPlan(3, n, batch, ModeEvict, must)}
	parent := plannedNodes(t, n, batch, plans...)[1]

	if rd := parent.Ready(); len(rd.States) != 0 {
		t.Fatalf("step 0 posts %v", rd.States)
	}
	if _, err := parent.AdvanceMember(MemberOutcome{Report: stepReport(plans[0], map[int]int{2: 1})}); err != nil {
		t.Fatal(err)
	}
	if rd := parent.Ready(); !slices.Equal(rd.States, []StatePost{{To: 2, Version: 1}}) {
		t.Fatalf("step 1 posts %v, want a state of version 1 to rank 2", rd.States)
	}
	// The link was busy: the state was not posted.
	if _, err := parent.AdvanceMember(MemberOutcome{Report: stepReport(plans[1], nil), Unsent: []int{2}}); err != nil {
		t.Fatal(err)
	}
	if rd := parent.Ready(); !slices.Equal(rd.States, []StatePost{{To: 2, Version: 2, Wait: true}}) {
		t.Fatalf("step 2 (edge Must) posts %v, want a waiting state of version 2 to rank 2", rd.States)
	}
	if _, err := parent.AdvanceMember(MemberOutcome{Report: stepReport(plans[2], nil)}); err != nil {
		t.Fatal(err)
	}
	if rd := parent.Ready(); len(rd.States) != 0 {
		t.Fatalf("step 3 posts %v with nothing folded or unsent", rd.States)
	}
}

// Flush: a parent posts every child the final state and drains it; a
// member without children posts nothing; a child awaits the final state
// until it has taken it, then sends its marker; every member's call is a
// ring over every rank. A rank about to rejoin gets the final state too.
func TestNodeFlush(t *testing.T) {
	const n, batch = 4, 64
	edge := Edge{Child: 3, Parent: 0}
	plans := []Plan{ringPlan(0, n, batch), evictPlan(1, n, batch, ModeEvict, edge), evictPlan(2, n, batch, ModeEvict, edge), ringPlan(3, n, batch)}
	nodes := plannedNodes(t, n, batch, plans...)
	for _, nd := range nodes {
		nd.Ready()
		if _, err := nd.AdvanceMember(MemberOutcome{Report: stepReport(plans[0], nil)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, nd := range nodes[:3] {
		nd.Ready()
		if _, err := nd.AdvanceMember(MemberOutcome{Report: stepReport(plans[1], map[int]int{3: 1})}); err != nil {
			t.Fatal(err)
		}
	}
	if err := nodes[3].Replay(stepReport(plans[1], map[int]int{3: 1})); err != nil {
		t.Fatal(err)
	}

	t.Run("evicted", func(t *testing.T) {
		rd := nodes[0].Flush()
		if want := []StatePost{{To: 3, Version: 2, Flags: StateFull | StateFinal, Wait: true}}; !slices.Equal(rd.States, want) || !slices.Equal(rd.Drain, []int{3}) {
			t.Fatalf("parent's Flush posts %v, drains %v; want %v and drain [3]", rd.States, rd.Drain, want)
		}
		if rd.Call.Kind != CallRing || rd.Step != 2 || !bytes.Equal(rd.Plan.Dump(), plans[2].Dump()) {
			t.Fatalf("parent's Flush %+v, want a ring under the plan of step 2", rd)
		}
		if rd = nodes[2].Flush(); rd.Role != RoleMember || len(rd.States) != 0 || len(rd.Drain) != 0 || rd.Call.Kind != CallRing {
			t.Fatalf("childless member's Flush %+v", rd)
		}
		child := nodes[3]
		if rd = child.Flush(); rd.Role != RoleChild || rd.Parent != 0 || !rd.Await {
			t.Fatalf("child's Flush before the final state %+v, want await from 0", rd)
		}
		if a := child.Adopt(2, StateFull|StateFinal); !a.Take || !a.Done || !a.Full {
			t.Fatalf("final state: %+v", a)
		}
		if !child.Done() || !child.Marker() {
			t.Fatalf("after the final state: done %v, marker %v", child.Done(), child.Marker())
		}
		if rd = child.Flush(); rd.Await {
			t.Fatalf("child's Flush after the final state %+v, want no await", rd)
		}
	})

	t.Run("rejoining", func(t *testing.T) {
		nodes := plannedNodes(t, n, batch, plans...)
		for _, nd := range nodes[:3] {
			for s := 0; s < 3; s++ {
				nd.Ready()
				if _, err := nd.AdvanceMember(MemberOutcome{Report: stepReport(plans[s], nil)}); err != nil {
					t.Fatal(err)
				}
			}
		}
		// Step 2's report readmitted rank 3; training ends before step 3.
		rd := nodes[0].Flush()
		if want := []StatePost{{To: 3, Version: 3, Flags: StateFull | StateFinal, Wait: true}}; !slices.Equal(rd.States, want) || !slices.Equal(rd.Drain, []int{3}) {
			t.Fatalf("Flush with rank 3 about to rejoin posts %v, drains %v; want %v and drain [3]", rd.States, rd.Drain, want)
		}
	})
}

// Invalid inputs are errors, never panics; a report of the wrong step is
// ErrOutOfOrder.
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
	ahead := good
	ahead.Step = 1
	behind := good
	behind.Step = -1
	for _, tc := range []struct {
		name  string
		rep   Report
		order bool // the error is ErrOutOfOrder
	}{
		{"ahead", ahead, true},
		{"behind", behind, true},
		{"zero report", Report{}, false},
		{"no child entries", Report{Step: 0, Current: good.Current}, false},
		{"short member entries", short, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noPanic(t, "AdvanceMember", func() {
				_, err := nd.AdvanceMember(MemberOutcome{Report: tc.rep})
				if err == nil || (tc.order && !errors.Is(err, ErrOutOfOrder)) {
					t.Fatalf("AdvanceMember(%s): %v", tc.name, err)
				}
			})
			noPanic(t, "Replay", func() {
				err := nd.Replay(tc.rep)
				if err == nil || (tc.order && !errors.Is(err, ErrOutOfOrder)) {
					t.Fatalf("Replay(%s): %v", tc.name, err)
				}
			})
		})
	}

	// A member that never was a child cannot rejoin at another step.
	noPanic(t, "Rejoined", func() {
		if err := nd.Rejoined(5); err == nil {
			t.Fatal("Rejoined(5) at step 0: no error")
		}
	})

	// A child fed its members' reports out of order.
	edge := Edge{Child: 3, Parent: 0}
	plans := []Plan{ringPlan(0, n, batch), evictPlan(1, n, batch, ModeEvict, edge), evictPlan(2, n, batch, ModeEvict, edge), evictPlan(3, n, batch, ModeEvict, edge)}
	child := plannedNodes(t, n, batch, plans...)[3]
	if _, err := child.AdvanceMember(MemberOutcome{Report: stepReport(plans[0], nil)}); err != nil {
		t.Fatal(err)
	}
	if err := child.Replay(stepReport(plans[2], nil)); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("child replays step 2 before step 1: %v", err)
	}
	if err := child.Replay(stepReport(plans[0], nil)); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("child replays step 0 again: %v", err)
	}
	if err := child.Rejoined(1); err == nil {
		t.Fatal("a child rejoins while its plan still evicts it: no error")
	}
	noPanic(t, "Adopt", func() {
		if a := child.Adopt(-3, StateFull|StateFinal); a != (Adoption{}) || child.Done() {
			t.Fatalf("Adopt of version −3: %+v", a)
		}
	})
}
