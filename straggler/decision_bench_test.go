package straggler

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkPolicyObserve is one decision of the adaptive policy (a step's
// report in, the next plan out) at large worlds, one rank 3× slower: the
// cost `ringtail sim` reports as decide_ms, without the simulation around
// it.
//
//	go test -run '^$' -bench PolicyObserve -benchmem ./straggler
func BenchmarkPolicyObserve(b *testing.B) {
	for _, n := range []int{1024, 16384} {
		b.Run(fmt.Sprintf("ranks=%d", n), func(b *testing.B) {
			p := benchPolicy(b, n)
			report := func() Report {
				pl := p.Plan()
				rep := Report{Step: pl.Step, Current: make([]RankReport, n), Child: make([]ChildReport, n)}
				for r := range n {
					tau := 2 * time.Millisecond
					if r == 2 {
						tau *= 3
					}
					c := time.Duration(pl.Shares[r]) * tau
					rep.Current[r] = RankReport{Present: true, Samples: pl.Shares[r], Compute: c, Arrival: c, Wait: 5 * time.Millisecond}
				}
				return rep
			}
			benchObserve(b, p, report)
		})
	}
}

// BenchmarkPolicyObservePowerLaw is one decision of the adaptive policy
// at 16,384 ranks when every rank's speed is drawn afresh each step from
// FlexRR's power law (α = 4): the heavy-tailed case, where every rank's
// prediction moves and the exact shares are re-solved.
//
//	go test -run '^$' -bench PolicyObservePowerLaw -benchmem ./straggler
func BenchmarkPolicyObservePowerLaw(b *testing.B) {
	const n = 16384
	p := benchPolicy(b, n)
	rng := rand.New(rand.NewPCG(1, 2))
	report := func() Report {
		pl := p.Plan()
		rep := Report{Step: pl.Step, Current: make([]RankReport, n), Child: make([]ChildReport, n)}
		for r := range n {
			slow := math.Pow(1-rng.Float64(), -1.0/4) // Pareto, α = 4
			c := time.Duration(float64(pl.Shares[r]) * slow * float64(2*time.Millisecond))
			rep.Current[r] = RankReport{Present: true, Samples: pl.Shares[r], Compute: c, Arrival: c, Wait: 5 * time.Millisecond}
		}
		return rep
	}
	benchObserve(b, p, report)
}

// benchPolicy is the adaptive preset at n ranks, 64 samples a rank, a
// 16 MiB gradient.
func benchPolicy(b *testing.B, n int) *Policy {
	cfg, err := Preset(NameAdaptive, n, 64*n)
	if err != nil {
		b.Fatal(err)
	}
	cfg.GradBytes = 16 << 20
	p, err := NewPolicy(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// benchObserve warms p with five reports, then times one Observe per
// iteration, each report built outside the timer.
func benchObserve(b *testing.B, p *Policy, report func() Report) {
	for range 5 {
		if _, err := p.Observe(report()); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		rep := report()
		b.StartTimer()
		if _, err := p.Observe(rep); err != nil {
			b.Fatal(err)
		}
	}
}
