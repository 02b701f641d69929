package sim

import (
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/straggler"
	"github.com/ringtail-ml/ringtail/straggler/inject"
)

// TestReassignPrice: with no straggler nothing moves and a step costs what
// BSP's does; with a 3× slow rank reassignment lands between FlexRR's
// Ideal and BSP; a late rank (persistent) hands its units to the others.
func TestReassignPrice(t *testing.T) {
	const n, batch, grad = 8, 8 * 64, 1 << 20
	per := 2 * time.Millisecond
	net := DefaultNetwork()
	cfg := straggler.DefaultReassignConfig(2)
	for _, tc := range []struct {
		spec  string
		moved bool
	}{{"", false}, {"slow=2:3x", true}, {"persistent=1:+128ms", true}} {
		var in *inject.Injector
		if tc.spec != "" {
			spec, err := inject.Parse(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			if in, err = inject.New(spec, n); err != nil {
				t.Fatal(err)
			}
		}
		p, err := Reassign(in, n, 0, 5, batch, per, grad, net, cfg, nil)
		if err != nil {
			t.Fatalf("%q: %v", tc.spec, err)
		}
		bsp, err := Run(Config{Ranks: n, Policy: straggler.NameBSP, Injector: in, Warmup: 0, Steps: 5, GlobalBatch: batch,
			PerSample: per, GradBytes: grad, Network: net})
		if err != nil {
			t.Fatal(err)
		}
		ideal := Ideal(in, n, 0, 5, batch, per, grad, net)
		if (p.Moved > 0) != tc.moved {
			t.Errorf("%q: moved %.3f of the units", tc.spec, p.Moved)
		}
		if p.PerBatch < ideal || p.PerBatch > bsp.PerBatch+time.Millisecond {
			t.Errorf("%q: reassignment %v per batch, Ideal %v, BSP %v", tc.spec, p.PerBatch, ideal, bsp.PerBatch)
		}
		if tc.moved && p.PerBatch >= bsp.PerBatch*3/4 {
			t.Errorf("%q: reassignment %v per batch is not well under BSP's %v", tc.spec, p.PerBatch, bsp.PerBatch)
		}
		t.Logf("%q: reassign %v, BSP %v, Ideal %v, moved %.3f", tc.spec, p.PerBatch, bsp.PerBatch, ideal, p.Moved)
	}
}

// TestCompareReassignColumnsOnlyWhenAsked: without ReassignUnit a row is
// what it was before reassignment existed (its fields zero, left out of
// the JSON); with it, the other columns do not change.
func TestCompareReassignColumnsOnlyWhenAsked(t *testing.T) {
	rows := func(unit int) []Row {
		var out []Row
		cfg := CompareConfig{Ranks: []int{8}, Patterns: []string{"slow-3x", "powerlaw-4"}, Warmup: 2, Steps: 6, BatchPerRank: 32,
			PerSample: time.Millisecond, GradBytes: 1 << 20, Seed: 1, ReassignUnit: unit}
		if err := Compare(cfg, func(r Row) error { out = append(out, r); return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	off, on := rows(0), rows(2)
	for i := range off {
		if off[i].Reassign != 0 || off[i].ReassignShares != 0 {
			t.Errorf("%s: reassignment priced without ReassignUnit", off[i].Pattern)
		}
		if on[i].Reassign <= 0 || on[i].ReassignShares <= 0 || on[i].Reassign >= on[i].BSP {
			t.Errorf("%s: reassign %v s, on shares %v s, BSP %v s", on[i].Pattern, on[i].Reassign, on[i].ReassignShares, on[i].BSP)
		}
		o := on[i]
		o.Reassign, o.ReassignRatio, o.ReassignMoved, o.ReassignShares, o.ReassignSharesRatio = 0, 0, 0, 0, 0
		o.Priced, o.PricedRatio, o.PricedSteps, o.PricedDecisionMeanMS = 0, 0, 0, 0
		if o != off[i] {
			t.Errorf("%s: the other columns changed:\n%+v\n%+v", o.Pattern, o, off[i])
		}
	}
}

// TestRunReassignsTheStepsThePolicyChooses: with Config.Reassign the
// simulation runs the steps whose plan reassigns under
// straggler.SimulateReassign — none where the predictions hold (a steady
// 3× rank: the same timeline as shares alone), most where they miss (a
// power law: faster than shares alone) — and every sample computed is
// applied once (Run checks it), whatever rows each rank computed.
func TestRunReassignsTheStepsThePolicyChooses(t *testing.T) {
	const n, batch, grad = 8, 8 * 32, 1 << 20
	per := time.Millisecond
	for _, tc := range []struct {
		spec     string
		reassign bool
	}{{"slow=2:3x", false}, {"seed=7;powerlaw=4", true}} {
		spec, err := inject.Parse(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		in, err := inject.New(spec, n)
		if err != nil {
			t.Fatal(err)
		}
		run := func(rc straggler.ReassignConfig) Result {
			// (The warm-up covers the steps that reassign before the
			// predictions are trusted.)
			res, err := Run(Config{Ranks: n, Policy: straggler.NameShares, Injector: in, Warmup: 5, Steps: 20, GlobalBatch: batch,
				PerSample: per, GradBytes: grad, Reassign: rc})
			if err != nil {
				t.Fatalf("%q: %v", tc.spec, err)
			}
			return res
		}
		shares, priced := run(straggler.ReassignConfig{}), run(straggler.DefaultReassignConfig(2))
		moved := false
		for _, rep := range priced.Reports[5:] {
			for r, rr := range rep.Current {
				moved = moved || rr.Samples != priced.Plans[rep.Step-1].Shares[r]
			}
		}
		switch {
		case !tc.reassign && (priced.ReassignSteps != 0 || priced.PerBatch != shares.PerBatch):
			t.Errorf("%q: %d steps reassigned, %v per batch against shares' %v", tc.spec, priced.ReassignSteps, priced.PerBatch, shares.PerBatch)
		case tc.reassign && (priced.ReassignSteps < 15 || !moved || priced.PerBatch >= shares.PerBatch):
			t.Errorf("%q: %d of 20 steps reassigned (rows moved: %v), %v per batch against shares' %v", tc.spec, priced.ReassignSteps, moved, priced.PerBatch, shares.PerBatch)
		}
		t.Logf("%q: %d steps reassigned, %v per batch, shares %v", tc.spec, priced.ReassignSteps, priced.PerBatch, shares.PerBatch)
	}
	if _, err := Run(Config{Ranks: 2, Policy: straggler.NameShares, Steps: 1, GlobalBatch: 4, PerSample: per,
		Reassign: straggler.ReassignConfig{UnitSize: 1, Initial: -1}}); err == nil {
		t.Fatal("an invalid reassignment configuration ran")
	}
}
