package balance

import (
	"fmt"
	"math"
)

// Micro is one rank's share of a step as AntDT-DD runs it: Accum
// micro-batches of at most Batch samples each, gradients summed over them
// before the step's reduction. The micro-batches sum to the share; they
// differ by at most one sample (the first Share mod Accum hold Batch, the
// rest Batch−1).
type Micro struct {
	// Share is the rank's samples in the step, C_r·B_r up to rounding.
	Share int `json:"share"`
	// Batch is B_r, the largest micro-batch: never more than the rank's cap.
	Batch int `json:"batch"`
	// Accum is C_r, the number of micro-batches (0 for an empty share).
	Accum int `json:"accum"`
}

// Sizes returns the micro-batches' sizes in order; they sum to Share.
func (m Micro) Sizes() []int {
	if m.Accum == 0 {
		return nil
	}
	out := make([]int, m.Accum)
	for i := range out {
		out[i] = m.Share / m.Accum
		if i < m.Share%m.Accum {
			out[i]++
		}
	}
	return out
}

// SplitShare splits a share of samples into the fewest micro-batches of at
// most limit samples each (limit ≤ 0: no limit, one micro-batch): Accum =
// ⌈share/limit⌉ near-equal micro-batches. It never exceeds limit, whatever
// the share: a share above the planned accumulation bound only costs more
// passes.
func SplitShare(share, limit int) Micro {
	if share <= 0 {
		return Micro{}
	}
	if limit <= 0 || share <= limit {
		return Micro{Share: share, Batch: share, Accum: 1}
	}
	c := (share + limit - 1) / limit
	return Micro{Share: share, Batch: (share + c - 1) / c, Accum: c}
}

// SplitShares is SplitShare over every rank: shares[r] under limits[r]
// (limits nil or limits[r] ≤ 0: unbounded).
func SplitShares(shares, limits []int) []Micro {
	out := make([]Micro, len(shares))
	for r, s := range shares {
		limit := 0
		if r < len(limits) {
			limit = limits[r]
		}
		out[r] = SplitShare(s, limit)
	}
	return out
}

// MemoryRank is one rank's input to PlanMicro: its speed and the largest
// micro-batch its device memory holds.
type MemoryRank struct {
	// Speed is v_r in samples per second (positive, finite).
	Speed float64
	// MicroCap is B̂max,r, the largest micro-batch that fits
	// (MaxBatchFromMemory); ≤ 0: unbounded.
	MicroCap int
	// MinBatch is the smallest share the rank may be given (0: none).
	MinBatch int
}

// MicroPlan is PlanMicro's result: per rank (micro-batch, accumulation),
// and the predicted step time max_r Share_r/v_r.
type MicroPlan struct {
	// Ranks are in input order; their shares sum to the global batch.
	Ranks []Micro `json:"ranks"`
	// StepS is the slowest rank's compute time per step, seconds.
	StepS float64 `json:"step_s"`
}

// PlanMicro splits a global batch over ranks of unequal speed and memory:
// AntDT-DD's Eq. 4 per rank, with each rank's micro-batches allowed to
// differ by one sample. It solves
//
//	min max_r S_r/v_r  s.t.  Σ S_r = B,  MinBatch_r ≤ S_r ≤ maxAccum·B̂max,r
//
// exactly in integers (AdjustBS, Eq. 3, with the memory-and-accumulation
// bound as each rank's maximum), then splits each share into the fewest
// micro-batches under the rank's cap (SplitShare): C_r = ⌈S_r/B̂max,r⌉ ≤
// maxAccum. Every plan of Eq. 4 (C_r equal micro-batches of B_r) is a plan
// here with S_r = C_r·B_r, so its step time is never longer than Eq. 4's
// (TestPlanMicro_NeverSlowerThanEq4); like Eq. 4 it charges nothing for an
// accumulation pass beyond its samples. It returns an error wrapping
// ErrInfeasible when the ranks cannot hold B even at maxAccum passes.
func PlanMicro(globalBatch, maxAccum int, ranks []MemoryRank) (MicroPlan, error) {
	if maxAccum < 1 {
		return MicroPlan{}, fmt.Errorf("%w: max accumulation %d must be ≥ 1", ErrInvalidInput, maxAccum)
	}
	speeds := make([]RankSpeed, len(ranks))
	caps := make([]int, len(ranks))
	for r, k := range ranks {
		speeds[r] = RankSpeed{Speed: k.Speed, MinBatch: k.MinBatch, MaxBatch: ShareLimit(k.MicroCap, maxAccum)}
		caps[r] = k.MicroCap
	}
	shares, err := AdjustBS(globalBatch, speeds)
	if err != nil {
		return MicroPlan{}, fmt.Errorf("balance: micro-batch plan of %d samples (≤ %d passes): %w", globalBatch, maxAccum, err)
	}
	plan := MicroPlan{Ranks: SplitShares(shares, caps)}
	for r, s := range shares {
		plan.StepS = math.Max(plan.StepS, BatchTime(s, ranks[r].Speed))
	}
	return plan, nil
}

// ShareLimit is the largest share a rank with micro-batch cap microCap
// computes in maxAccum passes: maxAccum·microCap, or 0 (unbounded) when
// microCap ≤ 0. It saturates instead of overflowing.
func ShareLimit(microCap, maxAccum int) int {
	if microCap <= 0 {
		return 0
	}
	if maxAccum > math.MaxInt/microCap {
		return math.MaxInt
	}
	return microCap * maxAccum
}
