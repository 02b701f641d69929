package straggler

import (
	"fmt"
	"math"
	"time"

	"github.com/ringtail-ml/ringtail/internal/cost"
)

// The modes ChooseCoded weighs, as CodedCost.Mode names them.
const (
	// CodedRing is plain synchronous SGD: equal shares, every rank waited
	// for, a ring allreduce.
	CodedRing = "ring"
	// CodedShares is the shares policy at its best: shares in proportion to
	// each rank's mean speed, every rank waited for, a ring allreduce.
	CodedShares = "shares"
	// CodedCoded is gradient coding (gradcode/coded): loads in proportion
	// to the mean speeds, every partition on s+1 ranks, the step decoded
	// from the first n−s, the leader folding the payloads.
	CodedCoded = "coded"
)

// Forever is the price of a mode that a stopped rank holds up: it never
// completes the step.
const Forever = time.Duration(math.MaxInt64)

// DefaultCodedMargin is the fraction by which coding must beat the best
// exact mode to be chosen, when CodedInput.Margin is 0: its prices rest on
// a window of observations, and its redundancy is paid for sure.
const DefaultCodedMargin = 0.1

// CodedInput is what ChooseCoded prices from: the slowdowns observed over
// a window of steps, an unslowed step's compute, and the one cost model's
// network for the reductions.
type CodedInput struct {
	// Factors are the observed compute slowdowns, one row per step of the
	// window and one value per rank: the rank's compute time over its
	// unslowed time for the same work (1 = on time, 3 = three times
	// slower). +Inf marks a rank that stopped in that step (it never
	// arrived). Every row has one value per rank.
	Factors [][]float64
	// Compute is an equal share's unslowed compute time.
	Compute time.Duration
	// GradBytes is the gradient the ring reduces; PayloadBytes a coded
	// payload (0: GradBytes); ResultBytes the decoded sum the leader sends
	// (0: twice PayloadBytes, as gradcode/coded sends it in float64).
	GradBytes, PayloadBytes, ResultBytes int
	// Net prices the reductions (internal/cost).
	Net cost.Net
	// MaxS is the largest s weighed (0: 1); it must be below the ranks.
	MaxS int
	// Margin is the fraction by which coding must beat the best exact
	// mode (0: DefaultCodedMargin).
	Margin float64
}

// CodedCost is one mode ChooseCoded weighed: the expected wait for the
// work the step needs, the communication after it, and their sum (Forever
// when a stopped rank holds the step up).
type CodedCost struct {
	Mode string `json:"mode"`
	// S is the stragglers a coded step tolerates (0 for ring and shares).
	S       int           `json:"s,omitempty"`
	Compute time.Duration `json:"compute_ns"`
	Comm    time.Duration `json:"comm_ns"`
	Time    time.Duration `json:"time_ns"`
}

// CodedChoice is ChooseCoded's pick with every mode it weighed, in the
// order weighed: ring, shares, then coded for s = 1…MaxS.
type CodedChoice struct {
	CodedCost
	Costs []CodedCost
}

// ChooseCoded prices gradient coding against the exact modes on the
// slowdowns observed, with one model for all three: rank r holds a
// fraction L_r of the data, its step's compute is L_r·n·Compute·f_r (f_r
// its slowdown in that step), and a step waits for the (n−s)-th arrival.
//
//   - ring: L_r = 1/n, s = 0, plus the ring allreduce (cost.Net.Ring).
//   - shares: L_r ∝ 1/m_r (m_r the rank's mean finite slowdown: what a
//     predictor learns), s = 0, plus the ring: it removes what is
//     predictable and nothing else.
//   - coded, s: L_r = min(1, τ/m_r) with Σ L_r = s+1 (every partition on
//     s+1 ranks, none twice on one: the heterogeneity-aware plan's
//     water-filling), the step decoded from the first n−s, plus the
//     leader's fold (cost.Net.LeaderFold): (s+1)× the compute against the
//     wait for the s latest.
//
// Each mode's wait is the mean over the window's steps. Coding is picked
// only when it beats the cheaper exact mode by Margin; ties among the
// exact modes go to the ring, among the coded to the smaller s. Errors
// wrap ErrInvalidConfig.
func ChooseCoded(in CodedInput) (CodedChoice, error) {
	if len(in.Factors) == 0 || len(in.Factors[0]) == 0 {
		return CodedChoice{}, fmt.Errorf("choose coded: no observations: %w", ErrInvalidConfig)
	}
	n := len(in.Factors[0])
	maxS := max(in.MaxS, 1)
	margin := in.Margin
	if margin == 0 {
		margin = DefaultCodedMargin
	}
	switch {
	case !(in.Compute > 0) || in.GradBytes < 0 || in.PayloadBytes < 0 || in.ResultBytes < 0:
		return CodedChoice{}, fmt.Errorf("choose coded: compute %v, bytes %d/%d/%d: %w",
			in.Compute, in.GradBytes, in.PayloadBytes, in.ResultBytes, ErrInvalidConfig)
	case in.MaxS < 0 || maxS >= n:
		return CodedChoice{}, fmt.Errorf("choose coded: s up to %d among %d ranks: %w", maxS, n, ErrInvalidConfig)
	case !(margin >= 0 && margin < 1):
		return CodedChoice{}, fmt.Errorf("choose coded: margin %v outside [0, 1): %w", margin, ErrInvalidConfig)
	}
	sums, counts := make([]float64, n), make([]int, n)
	for t, row := range in.Factors {
		if len(row) != n {
			return CodedChoice{}, fmt.Errorf("choose coded: step %d has %d ranks, step 0 %d: %w", t, len(row), n, ErrInvalidConfig)
		}
		for r, f := range row {
			if math.IsNaN(f) || f <= 0 {
				return CodedChoice{}, fmt.Errorf("choose coded: step %d rank %d slowdown %v: %w", t, r, f, ErrInvalidConfig)
			}
			if !math.IsInf(f, 1) {
				sums[r] += f
				counts[r]++
			}
		}
	}
	speed := make([]float64, n) // 1/m_r; 0 for a rank never seen to finish
	for r := range speed {
		if counts[r] > 0 {
			speed[r] = float64(counts[r]) / sums[r]
		}
	}
	payload := in.PayloadBytes
	if payload == 0 {
		payload = in.GradBytes
	}
	result := in.ResultBytes
	if result == 0 {
		result = 2 * payload
	}
	all := allRanks(n)
	ring := in.Net.Ring(all, in.GradBytes)
	w := &waits{factors: in.Factors, compute: float64(in.Compute) * float64(n), arrive: make([]float64, n),
		top: make([]float64, 0, maxS+1)}

	equal := filled(n, 1/float64(n))
	costs := []CodedCost{priced(CodedRing, 0, w.mean(equal, 0), ring)}
	costs = append(costs, priced(CodedShares, 0, w.mean(waterFill(speed, 1), 0), ring))
	for s := 1; s <= maxS; s++ {
		fold := in.Net.LeaderFold(0, all, n-s-1, payload, result)
		costs = append(costs, priced(CodedCoded, s, w.mean(waterFill(speed, s+1), s), fold))
	}
	pick := costs[0]
	if costs[1].Time < pick.Time {
		pick = costs[1]
	}
	best := costs[2]
	for _, c := range costs[3:] {
		if c.Time < best.Time {
			best = c
		}
	}
	if best.Time != Forever && (pick.Time == Forever || float64(best.Time) < (1-margin)*float64(pick.Time)) {
		pick = best
	}
	return CodedChoice{CodedCost: pick, Costs: costs}, nil
}

// priced is a CodedCost from its wait (ns, possibly +Inf) and its
// communication.
func priced(mode string, s int, wait float64, comm time.Duration) CodedCost {
	c := CodedCost{Mode: mode, S: s, Comm: comm, Time: Forever, Compute: Forever}
	if !math.IsInf(wait, 1) && wait+float64(comm) < float64(Forever) {
		c.Compute = time.Duration(wait)
		c.Time = c.Compute + comm
	}
	return c
}

// waits computes a mode's expected wait over the window.
type waits struct {
	factors [][]float64
	compute float64 // n·Compute, ns: the whole data's unslowed compute
	arrive  []float64
	top     []float64 // room for the s+1 latest arrivals
}

// mean is the mean over the steps of the (n−s)-th earliest arrival when
// rank r holds load[r] of the data: load[r]·n·Compute·f_r, a rank holding
// nothing arriving at once unless it stopped. +Inf when a step has more
// than s stopped ranks or the load could not be placed (nil).
func (w *waits) mean(load []float64, s int) float64 {
	if load == nil {
		return math.Inf(1)
	}
	total := 0.0
	for _, row := range w.factors {
		for r, f := range row {
			switch {
			case math.IsInf(f, 1):
				w.arrive[r] = f
			default:
				w.arrive[r] = load[r] * w.compute * f
			}
		}
		total += latest(w.arrive, s, w.top[:0])
	}
	return total / float64(len(w.factors))
}

// latest returns the (s+1)-th latest of arrive — the (n−s)-th earliest —
// keeping the s+1 latest seen in top (descending) in one pass: s is small
// (1 or 2) where n is large, so this is linear in n where a sort is not.
func latest(arrive []float64, s int, top []float64) float64 {
	for _, a := range arrive {
		if len(top) == s+1 && a <= top[s] {
			continue
		}
		if len(top) < s+1 {
			top = append(top, a)
		} else {
			top[s] = a
		}
		for i := len(top) - 1; i > 0 && top[i] > top[i-1]; i-- {
			top[i], top[i-1] = top[i-1], top[i]
		}
	}
	return top[s]
}

// waterFill returns loads L_r = min(1, τ·speed_r) summing to copies (each
// rank holds a partition at most once), or nil when fewer than copies
// ranks have a speed.
func waterFill(speed []float64, copies int) []float64 {
	load := make([]float64, len(speed))
	capped := make([]bool, len(speed))
	left := float64(copies)
	for left > 0 {
		free := 0.0
		for r, v := range speed {
			if !capped[r] {
				free += v
			}
		}
		if free == 0 {
			return nil
		}
		tau := left / free
		again := false
		for r, v := range speed {
			if !capped[r] && tau*v > 1 {
				capped[r], load[r] = true, 1
				left--
				again = true
			}
		}
		if again {
			continue
		}
		for r, v := range speed {
			if !capped[r] {
				load[r] = tau * v
			}
		}
		return load
	}
	return load
}
