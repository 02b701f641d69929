package gradcode

import (
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/mat"
)

// Reference code that only the tests use: the papers' explicit
// constructions (Tandon's cyclic B from an explicit H, any explicit B) for
// their worked examples, the reference decoder Combine that checks Encode
// and Decode end to end, and the compute-time model that checks the
// heterogeneous allocation (Theorem 5) and the group scheme's early finish.
// The runtime (gradcode/coded) decodes with Decode and sums on its own.

// Combine is the reference decoder: out = Σ_i decode[i]·payloads[i], in
// float64. payloads has one entry per rank (len(decode)); entries whose
// coefficient is 0 are skipped and may be nil (stragglers). It does not
// allocate. Errors wrap ErrShape.
func Combine[P Float](decode []float64, payloads [][]P, out []float64) error {
	if len(payloads) != len(decode) {
		return fmt.Errorf("%w: %d payloads for %d decoding coefficients", ErrShape, len(payloads), len(decode))
	}
	for i, a := range decode {
		if a != 0 && len(payloads[i]) != len(out) {
			return fmt.Errorf("%w: payload of rank %d has %d elements, output %d", ErrShape, i, len(payloads[i]), len(out))
		}
	}
	clear(out)
	for i, a := range decode {
		if a == 0 {
			continue
		}
		for e, x := range payloads[i] {
			out[e] += a * float64(x)
		}
	}
	return nil
}

// Load returns the number of partitions worker i computes.
func (p *Plan) Load(i int) int {
	return len(p.Assignment[i])
}

// PlanFromB wraps an explicit n×k encoding matrix (rows are workers) as a
// Custom plan tolerating s stragglers. Worker i's assignment is the support of
// row i, ascending. It fails with ErrNotDecodable if some set of s stragglers
// (all of them when there are at most 2000, otherwise bursts and a sample)
// cannot decode. Used for the papers' worked examples.
func PlanFromB(s int, b [][]float64) (*Plan, error) {
	n := len(b)
	if n < 1 || n > maxWorkers || s < 0 || s >= n {
		return nil, fmt.Errorf("%w: need 0 ≤ s < n ≤ %d rows (n = %d, s = %d)", ErrInvalidConfig, maxWorkers, n, s)
	}
	k := len(b[0])
	p := &Plan{Scheme: Custom, Construction: Explicit, N: n, S: s, K: k,
		Assignment: make([][]int, n), B: make([][]float64, n), Groups: [][]int{}}
	for i, row := range b {
		if len(row) != k {
			return nil, fmt.Errorf("%w: row %d has %d entries, row 0 has %d", ErrInvalidConfig, i, len(row), k)
		}
		p.B[i] = append([]float64(nil), row...)
		p.Assignment[i] = []int{}
		for j, x := range row {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("%w: B[%d][%d] = %v", ErrInvalidConfig, i, j, x)
			}
			if x != 0 {
				p.Assignment[i] = append(p.Assignment[i], j)
			}
		}
	}
	if err := p.finish(defaultTarget(n), "", 0, ampBound{}, 0); err != nil {
		return nil, fmt.Errorf("gradcode: explicit B does not tolerate %d stragglers: %w", s, err)
	}
	return p, nil
}

// CyclicFromH builds the cyclic scheme's plan from an explicit H (s×n, H·1 = 0)
// following Tandon's construction. It exists for worked examples and tests;
// NewPlan with Scheme Cyclic picks a better-conditioned B. H may be nil only
// when s = 0. The payload type is chosen from the plan's measured quality.
func CyclicFromH(n, s int, h *mat.Dense) (*Plan, error) {
	if n < 1 || n > maxWorkers || s < 0 || s >= n {
		return nil, fmt.Errorf("%w: cyclic plan needs 0 ≤ s < n ≤ %d (n = %d, s = %d)", ErrInvalidConfig, maxWorkers, n, s)
	}
	if err := checkTandonH(n, s, h); err != nil {
		return nil, err
	}
	b, cond, err := tandonB(n, s, h)
	if err != nil {
		return nil, err
	}
	p := &Plan{
		Scheme:       Cyclic,
		Construction: Explicit,
		N:            n,
		S:            s,
		K:            n,
		Assignment:   tandonSupport(n, s),
		B:            b,
		Groups:       [][]int{},
	}
	if err := p.finish(defaultTarget(n), "", cond, ampBound{}, 0); err != nil {
		return nil, err
	}
	return p, nil
}

// checkTandonH validates the shape of H and H·1 = 0.
func checkTandonH(n, s int, h *mat.Dense) error {
	if s == 0 {
		if h != nil {
			if r, _ := h.Dims(); r != 0 {
				return fmt.Errorf("%w: s = 0 needs no H", ErrInvalidConfig)
			}
		}
		return nil
	}
	if h == nil {
		return fmt.Errorf("%w: H is nil for s = %d", ErrInvalidConfig, s)
	}
	r, c := h.Dims()
	if r != s || c != n {
		return fmt.Errorf("%w: H is %d×%d, want s×n = %d×%d", ErrInvalidConfig, r, c, s, n)
	}
	for i := 0; i < s; i++ {
		sum, scale := 0.0, 0.0
		for j := 0; j < n; j++ {
			x := h.At(i, j)
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("%w: H[%d][%d] = %v", ErrInvalidConfig, i, j, x)
			}
			sum += x
			scale += math.Abs(x)
		}
		if math.Abs(sum) > 1e-9*math.Max(scale, 1) {
			return fmt.Errorf("%w: row %d of H sums to %g, want H·1 = 0", ErrInvalidConfig, i, sum)
		}
	}
	return nil
}

// EarliestDecodable returns the length of the shortest prefix of arrivalOrder
// (ranks in the order their payloads arrived) that can decode the gradient
// sum — for the group scheme possibly fewer than n−s arrivals, as soon as one
// whole group is in. Errors wrap ErrBadRanks or ErrNotDecodable.
func (p *Plan) EarliestDecodable(arrivalOrder []int) (int, error) {
	if err := checkRanks(p.N, arrivalOrder); err != nil {
		return 0, err
	}
	// Decodability is monotone in the set of arrivals: a superset keeps every
	// solution of a subset. Binary search the first decodable prefix.
	if !p.Decodable(arrivalOrder) {
		return 0, fmt.Errorf("%w: all %d arrivals %v", ErrNotDecodable, len(arrivalOrder), arrivalOrder)
	}
	lo, hi := 0, len(arrivalOrder) // prefix lo is not decodable, hi is
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if p.Decodable(arrivalOrder[:mid]) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, nil
}

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
