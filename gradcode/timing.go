package gradcode

import (
	"fmt"
	"math"
	"sort"
)

// FinishTimes returns when each worker finishes its partitions in one
// iteration: Load(i)/throughputs[i], +Inf for the ranks in stragglers (full
// stragglers never finish) and 0 for workers that hold nothing. Errors wrap
// ErrInvalidConfig or ErrBadRanks.
func (p *Plan) FinishTimes(throughputs []float64, stragglers []int) ([]float64, error) {
	if len(throughputs) != p.N {
		return nil, fmt.Errorf("%w: %d throughputs for n = %d", ErrInvalidConfig, len(throughputs), p.N)
	}
	if err := checkRanks(p.N, stragglers); err != nil {
		return nil, err
	}
	out := make([]float64, p.N)
	for i, c := range throughputs {
		if !(c > 0) || math.IsInf(c, 0) {
			return nil, fmt.Errorf("%w: throughput of worker %d is %v", ErrInvalidConfig, i, c)
		}
		out[i] = float64(p.Load(i)) / c
	}
	for _, r := range stragglers {
		out[r] = math.Inf(1)
	}
	return out, nil
}

// IterationTime is the compute time of one iteration of p when worker i
// computes throughputs[i] partitions per unit time and the ranks in
// stragglers never finish: the time at which the set of finished workers
// first becomes decodable (for the group scheme possibly before n−s have
// finished). Ties in finish time are broken by rank. Errors wrap
// ErrInvalidConfig, ErrBadRanks, or ErrNotDecodable when the non-stragglers
// cannot decode.
func IterationTime(p *Plan, throughputs []float64, stragglers []int) (float64, error) {
	t, err := p.FinishTimes(throughputs, stragglers)
	if err != nil {
		return 0, err
	}
	order := make([]int, 0, p.N)
	for i, x := range t {
		if !math.IsInf(x, 1) {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return t[order[a]] < t[order[b]] })
	l, err := p.EarliestDecodable(order)
	if err != nil {
		return 0, err
	}
	if l == 0 {
		return 0, nil
	}
	return t[order[l-1]], nil
}
