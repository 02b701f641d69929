package inject

import "math"

// PowerLaw is FlexRR's power-law pattern (§5.1): the time t a rank needs for
// an iteration has density p(t) ∝ t^−α, drawn independently per rank and per
// iteration.
//
// A power law needs a lower cut-off; ringtail takes the unslowed compute
// duration t₀ as that cut-off, so t is Pareto-distributed with shape α−1 and
// scale t₀: t = t₀·U^(−1/(α−1)) for U uniform in (0, 1]. Its mean is
// t₀·(α−1)/(α−2), finite only for α > 2, which is therefore required (FlexRR
// uses α = 4, 7 and 11; smaller α means heavier delays).
type PowerLaw struct {
	// Alpha is the exponent α (> 2).
	Alpha float64
}

func (p PowerLaw) clause() string { return "powerlaw=" + formatFloat(p.Alpha) }

func (p PowerLaw) validate() error {
	if !(p.Alpha > 2) || math.IsInf(p.Alpha, 0) {
		return &SpecError{Clause: p.clause(), Reason: "alpha must be a finite number > 2 (the mean iteration time is infinite for α ≤ 2)"}
	}
	return nil
}

// factor returns t/t₀ for rank at step.
func (p PowerLaw) factor(seed uint64, rank, step int) float64 {
	st := newStream(seed, patternPowerLaw, rank, step, 0)
	u := 1 - st.float64() // (0, 1]
	return math.Pow(u, -1/(p.Alpha-1))
}
