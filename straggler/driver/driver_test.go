package driver

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/straggler"
	"github.com/ringtail-ml/ringtail/straggler/driver/policy"
)

// rankRun is what one rank saw in a run of the harness.
type rankRun struct {
	results  []Result
	payloads [][]float32 // payload after each step
	flush    Result
	computed int // samples this rank computed
	dumps    [][]byte
}

// runJob runs steps steps of a toy job on every rank: rank r computes
// (sleeps) perSample×slow(r) per sample of its share, or until the plan's
// budget, and puts [samples, (r+1)·samples, 1…] in its payload. It then
// flushes. Every rank's view is returned.
func runJob(t *testing.T, comms []*ringtail.Comm, pol policy.Config, steps int, perSample time.Duration, slow func(r int) float64) []rankRun {
	t.Helper()
	n := len(comms)
	runs := make([]rankRun, n)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	noErrors(t, each(n, func(r int) error {
		pol := pol
		d, err := New(Config{Comm: comms[r], Payload: 8, Policy: pol, OpTimeout: 20 * time.Second})
		if err != nil {
			return err
		}
		defer d.Close()
		run := &runs[r]
		run.dumps = append(run.dumps, d.Plan().Dump())
		tau := time.Duration(float64(perSample) * slow(r))
		stepStart := time.Now()
		for s := 0; s < steps; s++ {
			p := d.Plan()
			samples, compute, cut := p.Shares[r], time.Duration(p.Shares[r])*tau, false
			busy := compute
			if p.Budget > 0 {
				samples, cut = int(p.Budget/tau), true
				compute, busy = time.Duration(samples)*tau, p.Budget
			}
			if err := ringtail.Sleep(ctx, busy); err != nil {
				return err
			}
			buf := d.Buffer()
			clear(buf)
			buf[0], buf[1] = float32(samples), float32((r+1)*samples)
			for i := 2; i < len(buf); i++ {
				buf[i] = 1
			}
			run.computed += samples
			res, err := d.Step(ctx, StepInput{Samples: samples, Compute: compute, Arrival: time.Since(stepStart), Cut: cut})
			stepStart = time.Now()
			if err != nil {
				return err
			}
			run.results = append(run.results, res)
			run.payloads = append(run.payloads, append([]float32(nil), d.Buffer()...))
			run.dumps = append(run.dumps, res.Next.Dump())
		}
		f, err := d.Flush(ctx)
		if err != nil {
			return err
		}
		run.flush = f
		run.payloads = append(run.payloads, append([]float32(nil), d.Buffer()...))
		if d.Pending() != 0 || d.box.size() != 0 {
			return fmt.Errorf("after flush: %d gradients owed, %d contributions held", d.Pending(), d.box.size())
		}
		return nil
	}))
	return runs
}

// checkAgreement holds every rank to the same plans (byte-identical dumps)
// and the same reduced payloads, step by step.
func checkAgreement(t *testing.T, runs []rankRun) {
	t.Helper()
	for r := 1; r < len(runs); r++ {
		if len(runs[r].dumps) != len(runs[0].dumps) {
			t.Fatalf("rank %d decided %d plans, rank 0 %d", r, len(runs[r].dumps), len(runs[0].dumps))
		}
		for s := range runs[0].dumps {
			if !bytes.Equal(runs[r].dumps[s], runs[0].dumps[s]) {
				t.Fatalf("plan %d differs:\nrank 0: %s\nrank %d: %s", s, runs[0].dumps[s], r, runs[r].dumps[s])
			}
		}
		for s := range runs[0].payloads {
			for i, v := range runs[0].payloads[s] {
				if runs[r].payloads[s][i] != v {
					t.Fatalf("step %d payload[%d]: rank 0 %v, rank %d %v", s, i, v, r, runs[r].payloads[s][i])
				}
			}
		}
	}
}

// checkConservation proves no gradient is lost: the samples applied over
// the run (steps plus flush) equal the samples computed, and each step's
// payload sums exactly the gradients of the samples it says it applied.
func checkConservation(t *testing.T, runs []rankRun) (late, carried, evictSteps int) {
	t.Helper()
	computed, applied := 0, 0
	for _, run := range runs {
		computed += run.computed
	}
	r0 := runs[0]
	for s, res := range r0.results {
		applied += res.Applied
		late += res.Late
		if evict := res.Plan.Mode == straggler.ModeEvict; evict {
			evictSteps++
		}
		if got := r0.payloads[s][0]; int(got) != res.Applied {
			t.Fatalf("step %d: payload sums %v samples' gradients, result says %d applied", s, got, res.Applied)
		}
	}
	for _, run := range runs {
		for _, res := range run.results {
			carried += res.Carried
		}
	}
	applied += r0.flush.Applied
	if int(r0.payloads[len(r0.payloads)-1][0]) != r0.flush.Applied {
		t.Fatalf("flush: payload sums %v samples, result says %d", r0.payloads[len(r0.payloads)-1][0], r0.flush.Applied)
	}
	if applied != computed {
		t.Fatalf("applied %d samples over the run, computed %d: gradients lost or duplicated", applied, computed)
	}
	return late, carried, evictSteps
}

func TestAdaptivePlansAgreeAndSharesFollowSpeed(t *testing.T) {
	const n, steps = 4, 14
	comms := startComms(t, n)
	pol, err := policy.Preset(policy.NameAdaptive, n, 64)
	if err != nil {
		t.Fatal(err)
	}
	runs := runJob(t, comms, pol, steps, time.Millisecond, func(r int) float64 {
		if r == 2 {
			return 3
		}
		return 1
	})
	checkAgreement(t, runs)
	checkConservation(t, runs)
	last := runs[0].results[steps-1].Next
	// Speeds 1, 1, 1/3, 1 → shares ≈ 64·(0.3, 0.3, 0.1, 0.3) = 19, 19, 6, 19.
	for r, sh := range last.Shares {
		if r != 2 && sh <= 2*last.Shares[2] {
			t.Fatalf("shares %v: the 3× slow rank 2 should get well under half of rank %d's", last.Shares, r)
		}
	}
	if last.Budget <= 0 {
		t.Fatalf("adaptive plan has no budget: %s", last.Dump())
	}
	// The budget lets every rank compute for the same time: the total it
	// buys is within a few samples of the global batch.
	got := runs[0].results[steps-1].Applied
	if got < 64-8 || got > 64+8 {
		t.Fatalf("last step applied %d samples under a budget sized for 64", got)
	}
}

func TestLateGradientsAreFoldedAtTheNextStepNotLost(t *testing.T) {
	const n, steps = 4, 12
	comms := startComms(t, n)
	pol, err := policy.Preset(policy.NameSTAR, n, 32)
	if err != nil {
		t.Fatal(err)
	}
	runs := runJob(t, comms, pol, steps, 2*time.Millisecond, func(r int) float64 {
		if r == 3 {
			return 4
		}
		return 1
	})
	checkAgreement(t, runs)
	late, carried, evictSteps := checkConservation(t, runs)
	t.Logf("evicting steps %d, children carried %d times, %d samples folded late", evictSteps, carried, late)
	if evictSteps == 0 {
		t.Fatalf("STAR never evicted a 4× slow rank: last plan %s", runs[0].results[steps-1].Next.Dump())
	}
	if carried == 0 || late == 0 {
		t.Fatalf("a 4× slow child never missed its parent's wait (carried %d, late %d samples): the carry path is untested", carried, late)
	}
	// Children received every step's result: their payloads match (checked
	// by checkAgreement), and they were children in evicting steps.
	children := 0
	for _, res := range runs[3].results {
		if res.Role == RoleChild {
			children++
		}
	}
	if children != evictSteps {
		t.Fatalf("rank 3 was a child in %d steps, plans evicted it in %d", children, evictSteps)
	}
}

func TestBSPIsOneAllReducePerStep(t *testing.T) {
	const n, steps = 3, 4
	comms := startComms(t, n)
	pol, err := policy.Preset(policy.NameBSP, n, 30)
	if err != nil {
		t.Fatal(err)
	}
	runs := runJob(t, comms, pol, steps, 200*time.Microsecond, func(int) float64 { return 1 })
	checkAgreement(t, runs)
	checkConservation(t, runs)
	for _, res := range runs[1].results {
		if res.Role != RoleMember || res.Applied != 30 || res.Plan.Mode != straggler.ModeRing || res.Plan.Budget != 0 {
			t.Fatalf("BSP step: role %v applied %d plan %s", res.Role, res.Applied, res.Plan.Dump())
		}
		// payload[1] = Σ (r+1)·10 = 60; payload[2..] = n.
		if p := runs[1].payloads[res.Step]; p[1] != 60 || p[7] != n {
			t.Fatalf("step %d payload %v", res.Step, p)
		}
	}
}
