package emulate

import (
	"fmt"

	"github.com/ringtail-ml/ringtail/balance"
)

// AntDTCase describes a heterogeneous cluster for the AntDT emulation.
// Time model: a device computes a micro-batch of b samples in
// max(b, MinBatch)/Speed seconds (constant below the saturation point,
// proportional above it); a step is C such micro-batches, then a barrier.
type AntDTCase struct {
	// Name is the case name in results.
	Name string
	// Classes are the device classes; MaxBatch is the memory limit
	// (see MaxBatchFromMemory) and MinBatch the saturation point.
	Classes []balance.DeviceClass
	// GlobalBatch is the samples per synchronous step.
	GlobalBatch int
	// Samples is the epoch size; the epoch is ⌊Samples/GlobalBatch⌋ full
	// steps (the remainder is dropped, like drop_last).
	Samples int
	// MinAccum and MaxAccum bound gradient accumulation for Eq. 4.
	MinAccum, MaxAccum int
}

// Validate reports a malformed case.
func (c AntDTCase) Validate() error {
	if c.Samples < c.GlobalBatch {
		return fmt.Errorf("%w: epoch of %d samples is shorter than one global batch %d", balance.ErrInvalidInput, c.Samples, c.GlobalBatch)
	}
	return balance.AccumConfig{GlobalBatch: c.GlobalBatch, MinAccum: c.MinAccum, MaxAccum: c.MaxAccum}.Validate()
}

// V100P100Case is AntDT's cluster B (§VII-A): 4 V100-like ranks three times
// as fast as 4 P100-like ranks ("V100 GPUs are consistently about three
// times faster than P100"), global batch 768, gradient accumulation up to 5.
// Speeds are ResNet-101-like (300 and 100 samples/s); both GPUs have 16 GB:
// 15 GiB free at 120 MiB per sample gives B̂_max = 121 by the 95% rule. The
// saturation points are 32 and 16 samples.
func V100P100Case(samples int) AntDTCase {
	bmax, err := balance.MaxBatchFromMemory(15<<30, 120<<20)
	if err != nil {
		panic(err) // constants above always fit
	}
	return AntDTCase{
		Name: "antdt-v100-p100",
		Classes: []balance.DeviceClass{
			{Name: "V100", Count: 4, Speed: 300, MinBatch: 32, MaxBatch: bmax},
			{Name: "P100", Count: 4, Speed: 100, MinBatch: 16, MaxBatch: bmax},
		},
		GlobalBatch: 768,
		Samples:     samples,
		MinAccum:    1,
		MaxAccum:    5,
	}
}

// microBatchS is the time of one micro-batch of b samples.
func microBatchS(b int, c balance.DeviceClass) float64 {
	return float64(max(b, c.MinBatch)) / c.Speed
}

// AntDT returns three plans for the case: "even" (DDP: every rank
// gets GlobalBatch/n), "adjust-bs" (LB-BSP/ADJUST_BS: AdjustBS with each
// rank capped at its memory limit, no accumulation) and "adjust-bs+accum"
// (AntDT-DD: AdjustBSAccum).
func AntDT(c AntDTCase) ([]EpochPlan, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	steps := c.Samples / c.GlobalBatch
	var ranks []balance.DeviceClass // one entry per rank
	var speeds []balance.RankSpeed
	for _, cl := range c.Classes {
		for range cl.Count {
			ranks = append(ranks, cl)
			speeds = append(speeds, balance.RankSpeed{Speed: cl.Speed, MaxBatch: cl.MaxBatch})
		}
	}
	n := len(ranks)
	if n == 0 {
		return nil, fmt.Errorf("%w: no ranks", balance.ErrInvalidInput)
	}

	even := make([]float64, n)
	for r := range n {
		b := c.GlobalBatch / n
		if r < c.GlobalBatch%n {
			b++
		}
		if b > ranks[r].MaxBatch {
			return nil, fmt.Errorf("%w: even split gives rank %d a batch of %d above its memory limit %d", balance.ErrInfeasible, r, b, ranks[r].MaxBatch)
		}
		even[r] = microBatchS(b, ranks[r])
	}

	adj, err := balance.AdjustBS(c.GlobalBatch, speeds)
	if err != nil {
		return nil, fmt.Errorf("adjust-bs: %w", err)
	}
	adjS := make([]float64, n)
	for r, b := range adj {
		adjS[r] = microBatchS(b, ranks[r])
	}

	plan, err := balance.AdjustBSAccum(balance.AccumConfig{GlobalBatch: c.GlobalBatch, MinAccum: c.MinAccum, MaxAccum: c.MaxAccum}, c.Classes)
	if err != nil {
		return nil, fmt.Errorf("adjust-bs+accum: %w", err)
	}
	accS := make([]float64, 0, n)
	for i, cp := range plan.Classes { // same order as c.Classes
		for range cp.Count {
			accS = append(accS, float64(cp.Accum)*microBatchS(cp.Batch, c.Classes[i]))
		}
	}

	return []EpochPlan{
		{Case: c.Name, Scheme: "even", StepS: repeatStep(even, steps)},
		{Case: c.Name, Scheme: "adjust-bs", StepS: repeatStep(adjS, steps)},
		{Case: c.Name, Scheme: "adjust-bs+accum", StepS: repeatStep(accS, steps)},
	}, nil
}
