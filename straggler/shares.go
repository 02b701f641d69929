package straggler

import (
	"fmt"
	"math"
	"time"

	"github.com/ringtail-ml/ringtail/balance"
)

// EqualShares splits m samples over n ranks as evenly as integers allow:
// the first m mod n ranks take one more (examples/train's Shard sizes).
func EqualShares(m, n int) []int {
	out := make([]int, n)
	for r := range out {
		out[r] = m / n
		if r < m%n {
			out[r]++
		}
	}
	return out
}

// ProportionalShares splits m samples over ranks whose per-sample times
// (ns) are perSample, so that the slowest rank's batch time is as small as
// possible with every rank given at least minShare: AntDT's ADJUST_BS
// (Eq. 3), solved exactly in integers by balance.AdjustBS on speeds
// 1/perSample. Shares are then proportional to speed up to rounding.
func ProportionalShares(m int, perSample []float64, minShare int) ([]int, error) {
	speeds := make([]balance.RankSpeed, len(perSample))
	for r, t := range perSample {
		speeds[r] = balance.RankSpeed{Speed: 1e9 / math.Max(t, 1), MinBatch: minShare}
	}
	shares, err := balance.AdjustBS(m, speeds)
	if err != nil {
		return nil, fmt.Errorf("straggler: shares of %d samples: %w", m, err)
	}
	return shares, nil
}

// BalancedTime is the time in which ranks with per-sample times perSample
// (ns) compute m samples together when each works all the time,
// m / Σ_r 1/τ_r, stretched by 1+slack: the compute budget, and FlexRR's
// Ideal compute time for the step.
func BalancedTime(m int, perSample []float64, slack float64) time.Duration {
	rate := 0.0
	for _, t := range perSample {
		rate += 1 / math.Max(t, 1)
	}
	if rate == 0 {
		return 0
	}
	return time.Duration(math.Round(float64(m) / rate * (1 + slack)))
}

// ShareRange returns rank's rows [lo, hi) of a batch of n rows split by
// shares (which sum to the global batch M): contiguous, disjoint, covering
// 0..n−1, rank r starting at ⌊n·Σ_{i<r} shares_i / M⌋. With n = M these are
// exactly the shares; a short last batch is split in proportion.
func ShareRange(shares []int, n, rank int) (lo, hi int) {
	total, before := 0, 0
	for i, s := range shares {
		if i < rank {
			before += s
		}
		total += s
	}
	if total == 0 {
		return 0, 0
	}
	lo = n * before / total
	hi = n * (before + shares[rank]) / total
	return lo, hi
}
