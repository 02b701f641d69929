package inject

import (
	"fmt"
	"time"
)

// Cause is a bit set naming the patterns that slowed a step.
type Cause uint8

// Causes, one bit per pattern.
const (
	CauseSlow Cause = 1 << iota
	CausePersistent
	CauseSlowWorker
	CausePowerLaw
	CauseTransient
)

// Effect is what the injector does to one rank at one step.
type Effect struct {
	// Compute is the duration the step's compute must take in total
	// (≥ the base duration given to At).
	Compute time.Duration
	// EndSlowdown is how many times slower than unslowed the rank runs at
	// the end of the step's compute (1 = full speed). It is what a host
	// monitor sampling CPU at the collective would see, and lets simulators
	// produce resource series consistent with the injected delays.
	EndSlowdown float64
	// Causes names the patterns that lengthened Compute.
	Causes Cause
	// Fault is the fault to perform at this step; Fault.Kind is FaultNone
	// when there is none.
	Fault Fault
	// LinkStall is how long the rank's link stalls from this step on (a
	// link clause's stall@stepN; 0: none). A runner on a test bed applies
	// it (testbed.Bed.Stall); it does not lengthen Compute.
	LinkStall time.Duration
}

// Injector evaluates a Spec for a world size. It is immutable and pure:
// safe for concurrent use, and At returns the same Effect for the same
// arguments in any call order.
type Injector struct {
	spec  Spec
	world int
	// factor[r] is the product of the slow and persistent factors of r.
	factor []float64
	// extra[r] is the sum of the persistent extra delays of r.
	extra []time.Duration
	// causes[r] are the static causes of r.
	causes []Cause
	// faults maps (rank, step) to its fault.
	faults map[[2]int]Fault
}

// New validates spec against world and returns its injector.
func New(spec Spec, world int) (*Injector, error) {
	if err := spec.Validate(world); err != nil {
		return nil, fmt.Errorf("inject: invalid spec for world %d: %w", world, err)
	}
	in := &Injector{
		spec:   spec,
		world:  world,
		factor: make([]float64, world),
		extra:  make([]time.Duration, world),
		causes: make([]Cause, world),
		faults: make(map[[2]int]Fault, len(spec.Faults)),
	}
	for r := range in.factor {
		in.factor[r] = 1
	}
	for _, sc := range spec.Slow {
		for _, r := range sc.Ranks {
			in.factor[r] *= sc.Factor
			in.causes[r] |= CauseSlow
		}
	}
	for _, p := range spec.Persistent {
		for _, r := range p.Ranks {
			if p.Factor != 0 {
				in.factor[r] *= p.Factor
			}
			in.extra[r] += p.Extra
			in.causes[r] |= CausePersistent
		}
	}
	for _, f := range spec.Faults {
		in.faults[[2]int{f.Rank, f.Step}] = f
	}
	return in, nil
}

// World returns the world size the injector was built for.
func (in *Injector) World() int { return in.world }

// At returns the effect for rank at step when the unslowed compute takes
// base. Ranks outside [0, World()) and negative steps get no effect.
//
// Patterns compose in a fixed order: the multiplicative ones first
// (slow, persistent Fx, power-law), then the slow-worker pattern slows the
// covered fraction c of that compute by (1+d), then the additive ones
// (persistent +D, transient) are added:
//
//	Compute = base·F·P·(1 + d·c) + Σ extra
func (in *Injector) At(rank, step int, base time.Duration) Effect {
	base = max(base, 0)
	eff := Effect{Compute: base, EndSlowdown: 1}
	if rank < 0 || rank >= in.world || step < 0 {
		return eff
	}
	eff.Fault = in.faults[[2]int{rank, step}]
	if l, ok := in.spec.LinkOf(rank); ok && l.Stall > 0 && l.StallStep == step {
		eff.LinkStall = l.Stall
	}
	factor := in.factor[rank]
	eff.Causes = in.causes[rank]
	if p := in.spec.PowerLaw; p != nil {
		f := p.factor(in.spec.Seed, rank, step)
		if f > 1 {
			eff.Causes |= CausePowerLaw
		}
		factor *= f
	}
	compute := float64(base) * factor
	endRate := factor
	if w := in.spec.SlowWorker; w != nil {
		c, atEnd := w.coverage(in.spec.Seed, rank, step)
		d := w.DelayPercent / 100
		if c > 0 {
			eff.Causes |= CauseSlowWorker
		}
		compute *= 1 + d*c
		if atEnd {
			endRate *= 1 + d
		}
	}
	extra := in.extra[rank]
	if t := in.spec.Transient; t != nil {
		if e := t.extra(in.spec.Seed, rank, step, base); e > 0 {
			extra += e
			eff.Causes |= CauseTransient
		}
	}
	if extra > 0 && compute > 0 {
		// Additive sleeps are spread over the step, slowing it uniformly.
		endRate *= 1 + float64(extra)/compute
	}
	eff.Compute = time.Duration(compute) + extra
	eff.EndSlowdown = endRate
	return eff
}
