package emulate

import (
	"fmt"
	"github.com/ringtail-ml/ringtail/balance"
	"math"
	"math/rand/v2"
)

// SizeDist is the distribution of sample sizes in the CHRONICA emulation.
type SizeDist int

const (
	// LogUniform draws size = DIF^U, U ~ U[0,1): sizes spread evenly over
	// orders of magnitude between 1 and DIF, like video durations.
	LogUniform SizeDist = iota
	// Uniform draws size ~ U[1, DIF).
	Uniform
)

// ChronicaCase describes a variable-size data set on a cluster for the
// CHRONICA emulation. True time model: rank r trains a step whose samples
// total S size units in StepOverheadS + S/Speeds[r] seconds.
type ChronicaCase struct {
	// Name is the case name in results; the epoch-level case is Name+"-epoch".
	Name string
	// Speeds are the ranks' true throughputs in size units per second.
	Speeds []float64
	// StepOverheadS is the true fixed cost of a step on every rank.
	StepOverheadS float64
	// Samples is the epoch size N.
	Samples int
	// GlobalBatch is β, samples per synchronous step; the epoch is
	// ⌊N/β⌋ steps.
	GlobalBatch int
	// SizeRatio is the data imbalance "DIF": max/min sample size (min is 1).
	SizeRatio float64
	// Dist is the size distribution.
	Dist SizeDist
	// NoiseFrac is the relative measurement noise (uniform ±NoiseFrac) on
	// the feedback the runtime prophet fits.
	NoiseFrac float64
	// Window is how many recent observations per rank the prophet fits.
	Window int
	// Seed drives sizes, the shuffle and the noise.
	Seed uint64
}

// Validate reports a malformed case.
func (c ChronicaCase) Validate() error {
	switch {
	case len(c.Speeds) == 0:
		return fmt.Errorf("%w: no ranks", balance.ErrInvalidInput)
	case c.GlobalBatch < len(c.Speeds):
		return fmt.Errorf("%w: global batch %d smaller than %d ranks", balance.ErrInvalidInput, c.GlobalBatch, len(c.Speeds))
	case c.Samples < c.GlobalBatch:
		return fmt.Errorf("%w: epoch of %d samples shorter than a global batch of %d", balance.ErrInvalidInput, c.Samples, c.GlobalBatch)
	case !(c.SizeRatio >= 1) || math.IsInf(c.SizeRatio, 0):
		return fmt.Errorf("%w: size ratio %v must be ≥ 1", balance.ErrInvalidInput, c.SizeRatio)
	case !(c.StepOverheadS >= 0), !(c.NoiseFrac >= 0 && c.NoiseFrac < 1):
		return fmt.Errorf("%w: overhead %v and noise %v must be ≥ 0 (noise < 1)", balance.ErrInvalidInput, c.StepOverheadS, c.NoiseFrac)
	case c.Window < 2:
		return fmt.Errorf("%w: prophet window %d must be ≥ 2", balance.ErrInvalidInput, c.Window)
	}
	for r, v := range c.Speeds {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: rank %d speed %v must be positive", balance.ErrInvalidInput, r, v)
		}
	}
	return nil
}

// ChronicaDIF64Case is the CHRONICA heterogeneous-cluster scenario
// (§VI-A: 4 g4dn + 4 g3s instances, modelled as 4 ranks twice as fast as
// the other 4), DIF 64, global batch 32, an epoch of 2048 samples (64 steps).
// With heterogeneous=false all 8 ranks run at the slower speed.
func ChronicaDIF64Case(heterogeneous bool, seed uint64) ChronicaCase {
	speeds := []float64{200, 200, 200, 200, 200, 200, 200, 200}
	name := "chronica-dif64-homo"
	if heterogeneous {
		speeds = []float64{400, 400, 400, 400, 200, 200, 200, 200}
		name = "chronica-dif64-hetero"
	}
	return ChronicaCase{
		Name: name, Speeds: speeds, StepOverheadS: 0.01,
		Samples: 2048, GlobalBatch: 32, SizeRatio: 64, Dist: LogUniform,
		NoiseFrac: 0.05, Window: 32, Seed: seed,
	}
}

// ChronicaSizes draws the case's sample sizes in [1, SizeRatio).
func ChronicaSizes(c ChronicaCase) []float64 {
	rng := rand.New(rand.NewPCG(c.Seed, 0x5ee5))
	sizes := make([]float64, c.Samples)
	for i := range sizes {
		u := rng.Float64()
		if c.Dist == Uniform {
			sizes[i] = 1 + u*(c.SizeRatio-1)
		} else {
			sizes[i] = math.Pow(c.SizeRatio, u)
		}
	}
	return sizes
}

// Chronica returns four plans. Case Name, step level: "random"
// (each step's β samples, in shuffled order, split into equal counts per
// rank, as TensorFlow's input pipeline does) and "chronica" (the same
// samples per step packed by PackStep with models the runtime prophet
// fitted online from noisy feedback; step 0 is random because there is no
// feedback yet). Case Name+"-epoch", epoch level, ranks owning partitions
// and training them without per-step barriers: "even-partition" (equal
// counts) and "rebalanced" (RebalanceEpoch with models fitted from the
// random scheme's feedback).
func Chronica(c ChronicaCase) ([]EpochPlan, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	sizes := ChronicaSizes(c)
	rng := rand.New(rand.NewPCG(c.Seed, 0x5107))
	order := rng.Perm(len(sizes))
	noise := rand.New(rand.NewPCG(c.Seed, 0x9015e))
	m := len(c.Speeds)
	steps := c.Samples / c.GlobalBatch
	truth := func(r int, total float64) float64 { return c.StepOverheadS + total/c.Speeds[r] }
	observe := func(t float64) float64 { return t * (1 + c.NoiseFrac*(2*noise.Float64()-1)) }

	random := EpochPlan{Case: c.Name, Scheme: "random", StepS: make([][]float64, steps)}
	packed := EpochPlan{Case: c.Name, Scheme: "chronica", StepS: make([][]float64, steps)}
	randomObs := make([][]balance.Observation, m)
	packedObs := make([][]balance.Observation, m)
	stepSizes := make([]float64, c.GlobalBatch)
	for k := range steps {
		batch := order[k*c.GlobalBatch : (k+1)*c.GlobalBatch]
		for i, j := range batch {
			stepSizes[i] = sizes[j]
		}
		// Random batching: contiguous equal-count slices.
		rt := make([]float64, m)
		totals := make([]float64, m)
		for i := range batch {
			totals[i*m/len(batch)] += stepSizes[i]
		}
		for r := range m {
			rt[r] = truth(r, totals[r])
			randomObs[r] = append(randomObs[r], balance.Observation{Size: totals[r], Seconds: observe(rt[r])})
		}
		random.StepS[k] = rt

		// CHRONICA: pack with the prophet's current models.
		if k == 0 {
			packed.StepS[k] = rt
			for r := range m {
				packedObs[r] = append(packedObs[r], randomObs[r][0])
			}
			continue
		}
		models := make([]balance.LinearModel, m)
		for r := range m {
			w := packedObs[r][max(0, len(packedObs[r])-c.Window):]
			fit, err := balance.FitRuntime(w)
			if err != nil {
				return nil, fmt.Errorf("step %d rank %d: %w", k, r, err)
			}
			models[r] = fit
		}
		p, err := balance.PackStep(stepSizes, models)
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", k, err)
		}
		clear(totals)
		for i, r := range p.Rank {
			totals[r] += stepSizes[i]
		}
		pt := make([]float64, m)
		for r := range m {
			pt[r] = truth(r, totals[r])
			packedObs[r] = append(packedObs[r], balance.Observation{Size: totals[r], Seconds: observe(pt[r])})
		}
		packed.StepS[k] = pt
	}

	// Epoch level: contiguous equal-count partitions of the shuffled order.
	used := order[:steps*c.GlobalBatch]
	parts := make([][]int, m)
	for i, j := range used {
		r := i * m / len(used)
		parts[r] = append(parts[r], j)
	}
	epochModels := make([]balance.LinearModel, m)
	for r := range m {
		fit, err := balance.FitRuntime(randomObs[r])
		if err != nil {
			return nil, fmt.Errorf("epoch model rank %d: %w", r, err)
		}
		epochModels[r] = balance.LinearModel{A: fit.A, B: fit.B * float64(steps)}
	}
	rb, err := balance.RebalanceEpoch(parts, sizes, epochModels)
	if err != nil {
		return nil, fmt.Errorf("rebalance: %w", err)
	}
	partTime := func(r int, part []int) float64 {
		s := 0.0
		for _, j := range part {
			s += sizes[j]
		}
		return float64(steps)*c.StepOverheadS + s/c.Speeds[r]
	}
	evenT, rebT := make([]float64, m), make([]float64, m)
	for r := range m {
		evenT[r] = partTime(r, parts[r])
		rebT[r] = partTime(r, rb.Parts[r])
	}
	return []EpochPlan{
		random, packed,
		{Case: c.Name + "-epoch", Scheme: "even-partition", StepS: [][]float64{evenT}},
		{Case: c.Name + "-epoch", Scheme: "rebalanced", StepS: [][]float64{rebT}},
	}, nil
}
