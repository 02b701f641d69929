package emulate

import "slices"

// EpochPlan is what one scheme asks each rank to compute during an epoch of
// synchronous steps: StepS[k][r] is the virtual seconds rank r computes in
// step k before the step's barrier. Plans are data; executing one (in
// virtual time with VirtualEpochS, or with real sleeps in cmd/ringtail)
// gives the epoch time.
type EpochPlan struct {
	// Case names the scenario ("antdt-v100-p100").
	Case string
	// Scheme names the balancing scheme ("even", "adjust-bs", ...). The
	// first plan of each case is the baseline for speed-ups.
	Scheme string
	// StepS[k][r] is rank r's compute time in step k, in seconds.
	StepS [][]float64
}

// VirtualEpochS returns the epoch time in virtual time: Σ_k max_r StepS[k][r]
// (every step ends at a barrier; communication is not modelled).
func (p EpochPlan) VirtualEpochS() float64 {
	t := 0.0
	for _, step := range p.StepS {
		if len(step) > 0 {
			t += slices.Max(step)
		}
	}
	return t
}

// Result is one row of `ringtail bench balance`.
type Result struct {
	// Case is the scenario name.
	Case string `json:"case"`
	// Scheme is the balancing scheme.
	Scheme string `json:"scheme"`
	// EpochS is the epoch time in (virtual, or scaled-back real) seconds.
	EpochS float64 `json:"epoch_s"`
	// Speedup is the case baseline's EpochS divided by this EpochS.
	Speedup float64 `json:"speedup"`
}

// Results pairs plans with their epoch times (epochS[i] for plans[i]) and
// computes each row's speed-up over the first plan of the same case.
func Results(plans []EpochPlan, epochS []float64) []Result {
	out := make([]Result, len(plans))
	base := map[string]float64{}
	for i, p := range plans {
		if _, ok := base[p.Case]; !ok {
			base[p.Case] = epochS[i]
		}
		sp := 0.0
		if epochS[i] > 0 {
			sp = base[p.Case] / epochS[i]
		}
		out[i] = Result{Case: p.Case, Scheme: p.Scheme, EpochS: epochS[i], Speedup: sp}
	}
	return out
}

// VirtualResults executes every plan in virtual time.
func VirtualResults(plans []EpochPlan) []Result {
	t := make([]float64, len(plans))
	for i, p := range plans {
		t[i] = p.VirtualEpochS()
	}
	return Results(plans, t)
}

// repeatStep returns a plan body of n identical steps.
func repeatStep(step []float64, n int) [][]float64 {
	out := make([][]float64, n)
	for i := range out {
		out[i] = step
	}
	return out
}
