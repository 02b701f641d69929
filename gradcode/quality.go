package gradcode

import (
	"math"
	"math/rand"
)

// Quality is a plan's measured numerical behaviour over straggler patterns.
//
// For a decode a over survivors F, rounding payload i to its wire type adds an
// error of relative size ≤ u to ‖Σ_j B[i][j]·g_j‖ ≈ ‖B_i‖₂·σ for partial
// gradients of typical size σ, while the true sum has size ≈ √k·σ. The
// amplification of the decode is therefore
//
//	amp(F) = sqrt(Σ_{i∈F} (a_i·‖B_i‖₂)² / k),
//
// and the expected relative error of the decoded sum is about u·amp(F)
// (u = 2⁻²⁴ for float32). The plan sends float32 when
// u·max amp·safety ≤ target, float64 otherwise.
type Quality struct {
	// Patterns is the number of straggler sets of size s checked.
	Patterns int `json:"patterns"`
	// Exhaustive is true when Patterns covers every set of s stragglers.
	Exhaustive bool `json:"exhaustive"`
	// MaxAbsB is the largest |B[i][j]|.
	MaxAbsB float64 `json:"max_abs_b"`
	// MaxAbsDecode is the largest |a_i| over the decodes checked.
	MaxAbsDecode float64 `json:"max_abs_decode"`
	// MaxCondDecode is the largest 2-norm condition number of the
	// row-normalised survivor matrix B_F over the decodes checked (1 for
	// group decodes).
	MaxCondDecode float64 `json:"max_cond_decode"`
	// MaxCondAux is the largest condition number of the square systems solved
	// while building B (auxiliary windows, or Tandon's s×s blocks of H).
	MaxCondAux float64 `json:"max_cond_aux"`
	// MaxAmplification is the largest amp(F) over the decodes checked.
	MaxAmplification float64 `json:"max_amplification"`
	// AmplificationBound is the class bound of structured plans (bound.go):
	// an upper bound on amp(F) over every straggler set when
	// BoundCertified, a sampled estimate otherwise; 0 when not available
	// (random and explicit constructions).
	AmplificationBound float64 `json:"amplification_bound"`
	// BoundCertified is true when AmplificationBound covers every straggler set.
	BoundCertified bool `json:"bound_certified"`
	// PredictedRelErr32 is UnitRoundoff32·max(MaxAmplification,
	// AmplificationBound)·safety, the relative error budgeted for float32
	// payloads; safety is 2 when the amplification is certified or every
	// straggler set was decoded, 4 otherwise.
	PredictedRelErr32 float64 `json:"predicted_rel_err_float32"`
	// Target is the relative error the plan must stay within.
	Target float64 `json:"target"`
}

// UnitRoundoff32 is the unit round-off of float32 (2⁻²⁴).
const UnitRoundoff32 = 1.0 / (1 << 24)

// Quality-check budgets.
const (
	// exhaustiveLimit: check every straggler set when there are at most this many.
	exhaustiveLimit = 2000
	// sampledPatterns: random straggler sets checked beyond the n bursts otherwise.
	sampledPatterns = 256
	// safetyExhaustive and safetySampled multiply the measured amplification.
	safetyExhaustive = 2.0
	safetySampled    = 4.0
)

// binomialAtMost returns C(n, r) if it is at most limit, else limit+1.
func binomialAtMost(n, r, limit int) int {
	if r < 0 || r > n {
		return 0
	}
	r = min(r, n-r)
	c := 1
	for i := 1; i <= r; i++ {
		c = c * (n - r + i) / i
		if c > limit {
			return limit + 1
		}
	}
	return c
}

// forEachSubset calls f with every r-subset of [0, n) in lexicographic order.
func forEachSubset(n, r int, f func([]int)) {
	idx := make([]int, r)
	for i := range idx {
		idx[i] = i
	}
	for {
		f(idx)
		i := r - 1
		for i >= 0 && idx[i] == n-r+i {
			i--
		}
		if i < 0 {
			return
		}
		idx[i]++
		for j := i + 1; j < r; j++ {
			idx[j] = idx[j-1] + 1
		}
	}
}

// stragglerPatterns returns the straggler sets a quality check visits: all of
// them when there are at most exhaustiveLimit, otherwise the n cyclic bursts
// {p, …, p+s−1} followed by random sets drawn from rng. The bool says whether
// the list is exhaustive.
func stragglerPatterns(n, s, random int, rng *rand.Rand) ([][]int, bool) {
	var out [][]int
	if binomialAtMost(n, s, exhaustiveLimit) <= exhaustiveLimit {
		forEachSubset(n, s, func(idx []int) { out = append(out, append([]int(nil), idx...)) })
		return out, true
	}
	for p := 0; p < n; p++ {
		burst := make([]int, s)
		for t := range burst {
			burst[t] = (p + t) % n
		}
		out = append(out, burst)
	}
	for t := 0; t < random; t++ {
		out = append(out, rng.Perm(n)[:s])
	}
	return out, false
}

// complement returns the ranks of [0, n) not in stragglers, ascending.
func complement(n int, stragglers []int) []int {
	dead := make([]bool, n)
	for _, r := range stragglers {
		dead[r] = true
	}
	out := make([]int, 0, n-len(stragglers))
	for i := 0; i < n; i++ {
		if !dead[i] {
			out = append(out, i)
		}
	}
	return out
}

// amplification is amp(F) of a decode a (see Quality).
func amplification(a []float64, b [][]float64, k int) float64 {
	sum := 0.0
	for i, ai := range a {
		if ai == 0 {
			continue
		}
		row := 0.0
		for _, x := range b[i] {
			row += x * x
		}
		sum += ai * ai * row
	}
	return math.Sqrt(sum / float64(max(k, 1)))
}

// measure decodes every pattern and fills the pattern-dependent fields of a
// Quality. It fails with ErrNotDecodable if some pattern does not decode.
func (p *Plan) measure(patterns [][]int, exhaustive bool) (Quality, error) {
	q := Quality{Patterns: len(patterns), Exhaustive: exhaustive, MaxCondDecode: 1}
	for _, row := range p.B {
		for _, x := range row {
			q.MaxAbsB = math.Max(q.MaxAbsB, math.Abs(x))
		}
	}
	for _, st := range patterns {
		a, stats, err := p.decode(complement(p.N, st))
		if err != nil {
			return q, err
		}
		for _, x := range a {
			q.MaxAbsDecode = math.Max(q.MaxAbsDecode, math.Abs(x))
		}
		q.MaxCondDecode = math.Max(q.MaxCondDecode, stats.cond)
		q.MaxAmplification = math.Max(q.MaxAmplification, amplification(a, p.B, p.K))
	}
	return q, nil
}

// ampBound is a class bound handed from construction to finish.
type ampBound struct {
	amp       float64
	certified bool
	known     bool
}

// finish measures the plan's quality over its straggler patterns and fixes
// its payload type (forced if dtype is set).
func (p *Plan) finish(target float64, dtype DType, auxCond float64, bound ampBound, seed int64) error {
	rng := rand.New(rand.NewSource(seed ^ 0x5eed9a7e))
	patterns, exhaustive := stragglerPatterns(p.N, p.S, sampledPatterns, rng)
	q, err := p.measure(patterns, exhaustive)
	if err != nil {
		return err
	}
	q.MaxCondAux = auxCond
	q.Target = target
	amp := q.MaxAmplification
	safety := safetySampled
	if exhaustive {
		safety = safetyExhaustive
	}
	if bound.known {
		q.AmplificationBound, q.BoundCertified = bound.amp, bound.certified
		amp = math.Max(amp, bound.amp)
		if bound.certified {
			safety = safetyExhaustive
		}
	}
	q.PredictedRelErr32 = UnitRoundoff32 * amp * safety
	p.Quality = q
	switch {
	case dtype != "":
		p.PayloadDType = dtype
	case q.PredictedRelErr32 <= target:
		p.PayloadDType = Float32
	default:
		p.PayloadDType = Float64
	}
	return nil
}
