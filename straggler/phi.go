package straggler

import (
	"fmt"
	"math"
)

// GNSEstimator estimates φ, the gradient noise scale B_simple = tr(Σ)/|G|²
// of McCandlish et al. (2018) that STAR's Eq. 1–3 use (the PGNS of STAR
// §IV-C1 with the identity as pre-conditioner, i.e. plain SGD), from
// quantities data-parallel training already has: the squared norm of a
// rank's local gradient (batch b = M/N) and of the all-reduced gradient
// (batch B = M). Since E|G_b|² = |G|² + tr(Σ)/b,
//
//	|G|² ≈ (B·|G_B|² − b·|G_b|²)/(B − b),   tr(Σ) ≈ (|G_b|² − |G_B|²)/(1/b − 1/B),
//
// both unbiased. Each is noisy, so both are smoothed by an EWMA before the
// ratio is taken (McCandlish et al., App. A.1). Feed it the mean of the
// ranks' local squared norms for a lower-variance |G_b|².
type GNSEstimator struct {
	alpha     float64
	trace, sq float64
	n         int
}

// NewGNSEstimator returns an estimator whose EWMAs use smoothing alpha in
// (0, 1].
func NewGNSEstimator(alpha float64) (*GNSEstimator, error) {
	if !(alpha > 0 && alpha <= 1) {
		return nil, fmt.Errorf("gns: alpha %v not in (0,1]: %w", alpha, ErrInvalidConfig)
	}
	return &GNSEstimator{alpha: alpha}, nil
}

// Observe feeds one step: smallSq = |G_b|² at batch small, bigSq = |G_B|²
// at batch big > small.
func (e *GNSEstimator) Observe(smallSq float64, small int, bigSq float64, big int) error {
	if small < 1 || big <= small || !(smallSq >= 0) || !(bigSq >= 0) || math.IsInf(smallSq, 0) || math.IsInf(bigSq, 0) {
		return fmt.Errorf("gns: need 1 ≤ small < big and finite squared norms ≥ 0: %w", ErrInvalidConfig)
	}
	b, bb := float64(small), float64(big)
	sq := (bb*bigSq - b*smallSq) / (bb - b)
	trace := (smallSq - bigSq) / (1/b - 1/bb)
	if e.n == 0 {
		e.sq, e.trace = sq, trace
	} else {
		e.sq += e.alpha * (sq - e.sq)
		e.trace += e.alpha * (trace - e.trace)
	}
	e.n++
	return nil
}

// Phi returns the current estimate of φ, and false while it is undefined
// (no data, or the smoothed |G|² or tr(Σ) not yet positive).
func (e *GNSEstimator) Phi() (float64, bool) {
	if e.n == 0 || !(e.sq > 0) || !(e.trace > 0) {
		return 0, false
	}
	return e.trace / e.sq, true
}
