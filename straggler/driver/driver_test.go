package driver

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/internal/commtest"
	"github.com/ringtail-ml/ringtail/straggler"
)

// rankRun is what one rank saw in a run of the harness.
type rankRun struct {
	steps    map[int]Result    // member steps by step
	payloads map[int][]float32 // member payload after each step
	child    int               // iterations run as a child
	replaced int               // states adopted as a child
	flush    Result
	computed int // samples this rank computed
	// reassigned is how many of its steps ran under Reassign.
	reassigned int
	params     []float32
	// lastChild: it flushed as a child without a Step's Done (evicted by
	// the last member step's decision).
	lastChild bool
}

// runJob runs a toy job until the members have run steps steps: rank r
// computes (sleeps) perSample×slow(r, i) per sample of its share in its
// i-th iteration, puts [samples, (r+1)·samples, samples…] in its payload,
// and — as a member — applies the payload to its parameters (params +=
// payload); a child gets its parameters from its parent. Every rank
// flushes and applies the leftovers. Every rank's view is returned.
func runJob(t *testing.T, comms []*ringtail.Comm, pol straggler.Config, steps int, perSample time.Duration, slow func(r, i int) float64) []rankRun {
	return runJobPausing(t, comms, pol, steps, perSample, slow, nil)
}

// runJobPausing is runJob whose rank r, before its i-th iteration,
// spends pause(r, i) outside its compute — what a training loop does
// between steps (an evaluation, a checkpoint, logging): the rank arrives
// late at the step with no slower compute to show for it.
func runJobPausing(t *testing.T, comms []*ringtail.Comm, pol straggler.Config, steps int, perSample time.Duration, slow func(r, i int) float64, pause func(r, i int) time.Duration) []rankRun {
	t.Helper()
	return runJobWith(t, comms, pol, steps, perSample, slow, pause, nil)
}

// runJobWith is runJobPausing whose steps run under Reassign with
// reassign's configuration, when it is not nil and the step can.
func runJobWith(t *testing.T, comms []*ringtail.Comm, pol straggler.Config, steps int, perSample time.Duration, slow func(r, i int) float64, pause func(r, i int) time.Duration, reassign *straggler.ReassignConfig) []rankRun {
	t.Helper()
	n := len(comms)
	runs := make([]rankRun, n)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	commtest.NoErrors(t, commtest.Each(n, func(r int) error {
		d, err := New(ctx, Config{Comm: comms[r], Payload: 8, Policy: pol, OpTimeout: 30 * time.Second})
		if err != nil {
			return err
		}
		run := &runs[r]
		run.steps, run.payloads = map[int]Result{}, map[int][]float32{}
		params, velocity := make([]float32, 8), make([]float32, 3)
		d.SetState(params, velocity)
		apply := func(applied int) {
			for i, g := range d.Buffer() {
				params[i] += g
			}
			velocity[0] += float32(applied)
		}
		stepStart := time.Now()
		done := false
		for i := 0; ; i++ {
			// Like a training loop (driver.Sync's users): stop when the
			// step to compute is past the end. A member's is the plan's
			// step; a child's the version of its parameters, which reaches
			// the end with the final state (Done) — or at once for a rank
			// the last member step evicted, which then flushes as a child.
			if d.Next() >= steps {
				break
			}
			if pause != nil {
				if err := ringtail.Sleep(ctx, pause(r, i)); err != nil {
					return err
				}
			}
			p := d.Plan()
			tau := time.Duration(float64(perSample) * slow(r, i))
			samples := p.Shares[r]
			compute := time.Duration(samples) * tau
			arrival := func() time.Duration { return time.Since(stepStart) }
			if reassign != nil && d.CanReassign() {
				call := time.Now()
				out, err := d.Reassign(ctx, ReassignInput{Config: *reassign, Rows: total(p.Shares), Expect: max(compute, time.Millisecond),
					Compute: func(ctx context.Context, u straggler.Unit) error {
						return ringtail.Sleep(ctx, time.Duration(u.Hi-u.Lo)*tau)
					}})
				if err != nil {
					return err
				}
				samples, compute = out.Samples, out.Compute
				arrival = func() time.Duration { return call.Sub(stepStart) + out.Elapsed }
				run.reassigned++
			} else if err := ringtail.Sleep(ctx, compute); err != nil {
				return err
			}
			buf := d.Buffer()
			buf[0], buf[1] = float32(samples), float32((r+1)*samples)
			for k := 2; k < len(buf); k++ {
				buf[k] = float32(samples)
			}
			run.computed += samples
			res, err := d.Step(ctx, StepInput{Samples: samples, Compute: compute, Arrival: arrival()})
			stepStart = time.Now()
			if err != nil {
				return err
			}
			if res.Role == straggler.RoleChild {
				run.child++
				if res.StateReplaced {
					run.replaced++
				}
				if res.Done {
					done = true
					break
				}
				continue
			}
			run.steps[res.Step] = res
			run.payloads[res.Step] = slices.Clone(d.Buffer())
			apply(res.Applied)
		}
		run.lastChild = d.Role() == straggler.RoleChild && !done
		f, err := d.Flush(ctx)
		if err != nil {
			return err
		}
		run.flush = f
		if f.Applied > 0 {
			apply(f.Applied)
		}
		run.params = append(slices.Clone(params), velocity...)
		return nil
	}))
	return runs
}

// checkRun holds the members to identical plans and payloads step by step,
// proves that no gradient was lost or folded twice (the samples applied
// over the run, flush included, equal the samples computed, and every
// payload sums exactly the gradients of the samples it says it applied),
// and that every rank, children included, ends with identical parameters.
// It returns the members' view of every step.
func checkRun(t *testing.T, runs []rankRun, steps int) []Result {
	t.Helper()
	view := make([]Result, steps)
	computed, applied := 0, 0
	for _, run := range runs {
		computed += run.computed
	}
	for s := 0; s < steps; s++ {
		first := -1
		for r, run := range runs {
			res, ok := run.steps[s]
			if !ok {
				continue
			}
			if first < 0 {
				first, view[s] = r, res
				applied += res.Applied
				if got := run.payloads[s][0]; int(got) != res.Applied {
					t.Fatalf("step %d: payload sums %v samples' gradients, result says %d applied", s, got, res.Applied)
				}
				continue
			}
			if !bytes.Equal(res.Next.Dump(), view[s].Next.Dump()) || !slices.Equal(run.payloads[s], runs[first].payloads[s]) {
				t.Fatalf("step %d: rank %d and rank %d disagree:\n%s\n%s", s, r, first, res.Next.Dump(), view[s].Next.Dump())
			}
		}
		if first < 0 {
			t.Fatalf("no member ran step %d", s)
		}
	}
	applied += runs[0].flush.Applied
	if applied != computed {
		t.Fatalf("applied %d samples over the run, computed %d: gradients lost or folded twice", applied, computed)
	}
	for r := 1; r < len(runs); r++ {
		if !slices.Equal(runs[r].params, runs[0].params) {
			t.Fatalf("rank %d ends with state %v, rank 0 with %v", r, runs[r].params, runs[0].params)
		}
	}
	return view
}

func TestBSPIsOneAllReducePerStep(t *testing.T) {
	const n, steps = 3, 4
	comms := startComms(t, n)
	pol, err := straggler.Preset(straggler.NameBSP, n, 30)
	if err != nil {
		t.Fatal(err)
	}
	runs := runJob(t, comms, pol, steps, 200*time.Microsecond, func(int, int) float64 { return 1 })
	view := checkRun(t, runs, steps)
	for s, res := range view {
		if res.Applied != 30 || res.Plan.Mode != straggler.ModeRing || res.Plan.Budget != 0 || res.Folded != 0 {
			t.Fatalf("BSP step %d: applied %d plan %s", s, res.Applied, res.Plan.Dump())
		}
		// payload[1] = Σ (r+1)·10 = 60.
		if p := runs[1].payloads[s]; p[1] != 60 {
			t.Fatalf("step %d payload %v", s, p)
		}
	}
}

// STAR alone on a 3× slow rank: it is evicted, computes at its own pace
// (more than one member step per iteration), its gradients are folded
// within the staleness bound, it follows the members' parameters, and no
// sample is lost.
func TestAnEvictedChildComputesAtItsOwnPace(t *testing.T) {
	const n, steps = 4, 24
	comms := startComms(t, n)
	pol, err := straggler.Preset(straggler.NameSTAR, n, 32)
	if err != nil {
		t.Fatal(err)
	}
	runs := runJob(t, comms, pol, steps, 2*time.Millisecond, func(r, _ int) float64 {
		if r == 2 {
			return 3
		}
		return 1
	})
	view := checkRun(t, runs, steps)
	evict, folded, maxStale := 0, 0, 0.0
	for _, res := range view {
		if res.Plan.Mode == straggler.ModeEvict {
			evict++
			// Rank 2 is the straggler; on a loaded machine another rank
			// may look slow for a while too.
			if !slices.Contains(res.Plan.Evicted, 2) {
				t.Fatalf("step %d evicted %v, not rank 2", res.Step, res.Plan.Evicted)
			}
		}
		folded += res.Folded
		if res.Folded > 0 {
			maxStale = max(maxStale, res.Staleness)
		}
	}
	t.Logf("evicting steps %d of %d, child iterations %d, gradients folded %d, states adopted %d, max staleness %.1f",
		evict, steps, runs[2].child, folded, runs[2].replaced, maxStale)
	if evict == 0 || runs[2].child == 0 || folded == 0 || runs[2].replaced == 0 {
		t.Fatalf("rank 2 (3× slow) was never a child at its own pace: evict %d, child iterations %d, folded %d, states %d",
			evict, runs[2].child, folded, runs[2].replaced)
	}
	if runs[2].child >= evict {
		t.Fatalf("rank 2 ran %d iterations as a child over %d evicting steps: it did not run at its own pace", runs[2].child, evict)
	}
	if maxStale > float64(pol.WithDefaults().MaxStaleness)+1 {
		t.Fatalf("a gradient was folded %.1f steps stale, bound %d", maxStale, pol.WithDefaults().MaxStaleness)
	}
}

// A rank evicted by the last member step's decision has no step left to
// compute as a child: its Flush takes the final state and sends the marker
// its new parent's Flush folds up to (it hung until the operation timeout
// before). The run ends at several steps around the first eviction so that
// one of them ends right after it.
func TestARankEvictedAtTheLastStepFlushesAsAChild(t *testing.T) {
	const n = 4
	comms := startComms(t, n)
	pol, err := straggler.Preset(straggler.NameSTAR, n, 32)
	if err != nil {
		t.Fatal(err)
	}
	hit := 0
	for steps := 2; steps <= 7; steps++ {
		runs := runJob(t, comms, pol, steps, 2*time.Millisecond, func(r, _ int) float64 {
			if r == 2 {
				return 3
			}
			return 1
		})
		checkRun(t, runs, steps)
		if runs[2].lastChild {
			hit++
		}
	}
	t.Logf("runs ending right after an eviction: %d of 6", hit)
}

// A rank slow only for a while (4 iterations) is evicted, then rejoins the ring with the
// members' exact state; nothing is lost across the changes.
func TestAChildRejoinsWhenItIsNoLongerSlow(t *testing.T) {
	const n, steps = 4, 40
	comms := startComms(t, n)
	pol, err := straggler.Preset(straggler.NameSTAR, n, 32)
	if err != nil {
		t.Fatal(err)
	}
	runs := runJob(t, comms, pol, steps, 2*time.Millisecond, func(r, i int) float64 {
		if r == 1 && i < 4 {
			return 4
		}
		return 1
	})
	view := checkRun(t, runs, steps)
	evicted, rejoined := false, false
	for _, res := range view {
		if res.Plan.Mode == straggler.ModeEvict {
			evicted = true
		} else if evicted && res.Plan.IsMember(1) {
			rejoined = true
		}
	}
	var modes []string
	for _, res := range view {
		modes = append(modes, fmt.Sprintf("%s%v(τ1=%v a1=%v f=%d)", res.Plan.Mode, res.Plan.Evicted, res.Plan.PerSample[1], res.Plan.Predicted[1], res.Folded))
	}
	t.Logf("modes by step: %v", modes)
	if !evicted || !rejoined {
		t.Fatalf("rank 1 (4× slow for 4 iterations) evicted %v, rejoined %v", evicted, rejoined)
	}
}

// In-step reassignment beside eviction: a rank evicted for its slowness
// computes at its own pace while the members' steps are not reassigned,
// and rejoins through a plain step (its parent sends it the parameters
// after its compute: a reassigned step would have the parent wait for the
// rejoining rank's messages and the rank for the parameters); the other
// steps reassign, nothing is lost or folded twice, and every rank ends
// with the same state. The reassignment here never offers work (its
// trigger is out of reach), so that the slow rank is evicted as without
// it, but its ranks still wait for each other's messages every step.
func TestReassignBesideEvictionAndRejoin(t *testing.T) {
	const n, steps = 4, 40
	comms := startComms(t, n)
	pol, err := straggler.Preset(straggler.NameSTAR, n, 32)
	if err != nil {
		t.Fatal(err)
	}
	cfg := straggler.DefaultReassignConfig(1)
	pol.Reassign, pol.ReassignAt = true, -1 // every step that can, whatever the predictions
	cfg.Trigger = 1e9
	runs := runJobWith(t, comms, pol, steps, 2*time.Millisecond, func(r, i int) float64 {
		if r == 1 && i < 4 {
			return 4
		}
		return 1
	}, nil, &cfg)
	view := checkRun(t, runs, steps)
	evicted, rejoined, full := false, false, 0
	for _, res := range view {
		switch {
		case res.Plan.Mode == straggler.ModeEvict:
			evicted = true
		case evicted && res.Plan.IsMember(1):
			rejoined = true
		}
		if len(res.Plan.Members) == n {
			full++
		}
	}
	if !evicted || !rejoined {
		var modes []string
		for _, res := range view {
			modes = append(modes, fmt.Sprintf("%s%v(τ1=%v a1=%v)", res.Plan.Mode, res.Plan.Evicted, res.Plan.PerSample[1], res.Plan.Predicted[1]))
		}
		t.Fatalf("rank 1 (4× slow for 4 iterations) evicted %v, rejoined %v; modes by step: %v", evicted, rejoined, modes)
	}
	if runs[0].reassigned == 0 || runs[0].reassigned >= full {
		t.Fatalf("rank 0 reassigned %d steps of %d with every rank a member; want some, not the rejoining one", runs[0].reassigned, full)
	}
}

// A training loop whose rank 0 evaluates every few steps (a pause between
// steps, three steps long) ends cleanly under every policy: the ranks
// agree on the last step, a rank evicted for its pauses finishes or is
// told to stop, nothing is lost, every rank ends with the same state.
func TestARunEndsCleanlyWhenOneRankEvaluatesEveryFewSteps(t *testing.T) {
	const n, steps = 4, 30
	comms := startComms(t, n)
	for _, name := range straggler.Names() {
		pol, err := straggler.Preset(name, n, 32)
		if err != nil {
			t.Fatal(err)
		}
		runs := runJobPausing(t, comms, pol, steps, time.Millisecond, func(int, int) float64 { return 1 },
			func(r, i int) time.Duration {
				if r == 0 && i%5 == 4 {
					return 25 * time.Millisecond
				}
				return 0
			})
		view := checkRun(t, runs, steps)
		modes := map[straggler.Mode]int{}
		for _, res := range view {
			modes[res.Plan.Mode]++
		}
		t.Logf("%s: steps by mode %v", name, modes)
	}
}

// A rank late at every step whatever its batch (30 ms between steps: a
// slow link, a stall) is left out of the ring the exact way under the
// shares preset: while it is out it computes nothing and every step
// applies the whole global batch — the members take its rows — and no
// sample is lost or folded twice.
func TestAnExcludedRankComputesNothingWhileTheMembersApplyTheWholeBatch(t *testing.T) {
	const n, steps, batch = 4, 30, 32
	comms := startComms(t, n)
	pol, err := straggler.Preset(straggler.NameShares, n, batch)
	if err != nil {
		t.Fatal(err)
	}
	runs := runJobPausing(t, comms, pol, steps, time.Millisecond, func(int, int) float64 { return 1 },
		func(r, _ int) time.Duration {
			if r == 3 {
				return 30 * time.Millisecond
			}
			return 0
		})
	view := checkRun(t, runs, steps)
	excluded := 0
	for _, res := range view {
		if res.Plan.Mode != straggler.ModeExclude {
			continue
		}
		excluded++
		if res.Applied != batch || res.Plan.Shares[3] != 0 || !slices.Equal(res.Plan.Evicted, []int{3}) {
			t.Fatalf("step %d excludes %v with shares %v and applies %d samples, want rank 3 out and all %d applied",
				res.Step, res.Plan.Evicted, res.Plan.Shares, res.Applied, batch)
		}
	}
	t.Logf("%d of %d steps excluded rank 3; it ran %d iterations as a child", excluded, steps, runs[3].child)
	if excluded == 0 {
		t.Fatalf("rank 3, 30 ms late at every step, was never excluded")
	}
}

// total is the sum of shares.
func total(shares []int) int {
	t := 0
	for _, s := range shares {
		t += s
	}
	return t
}
