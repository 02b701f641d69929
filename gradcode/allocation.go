package gradcode

import (
	"fmt"
	"math"
	"sort"
)

// OptimalComputeTime is the Theorem-5 bound: the smallest per-iteration
// compute time T with which k partitions, each computed by s+1 distinct
// workers, can be spread over workers that compute throughputs[i] partitions
// per unit time, when every worker is busy for the same time T.
//
// In the paper's regime (no worker's share exceeds k) it is
// T* = (s+1)·k / Σ c_i. A worker can hold each partition at most once, so its
// load is capped at k; the bound then water-fills: T* is the smallest T with
// Σ min(c_i·T, k) = (s+1)·k.
func OptimalComputeTime(throughputs []float64, s, k int) (float64, error) {
	n := len(throughputs)
	if n == 0 || s < 0 || s >= n || k < 1 {
		return 0, fmt.Errorf("%w: optimal time needs 0 ≤ s < n and k ≥ 1 (n = %d, s = %d, k = %d)", ErrInvalidConfig, n, s, k)
	}
	c := make([]float64, n)
	for i, t := range throughputs {
		if !(t > 0) || math.IsInf(t, 0) {
			return 0, fmt.Errorf("%w: throughput of worker %d is %v", ErrInvalidConfig, i, t)
		}
		c[i] = t
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(c)))
	rest := 0.0
	for _, t := range c {
		rest += t
	}
	need := float64((s + 1) * k)
	// Cap the j fastest workers at k and share the remainder among the others.
	for j := 0; j < n; j++ {
		t := (need - float64(j*k)) / rest
		if c[j]*t <= float64(k)*(1+1e-12) {
			return t, nil
		}
		rest -= c[j]
	}
	// Unreachable for s < n: capping every worker already covers (s+1)·k.
	return float64(k) / c[n-1], nil
}

// loads returns the integer number of partitions per worker for k partitions
// and s stragglers: quotas c_i·T* (Theorem 5), rounded by the largest
// remainder method so that they sum to (s+1)·k with none above k. Ties go to
// the lower rank.
func loads(c []float64, s, k int) ([]int, error) {
	t, err := OptimalComputeTime(c, s, k)
	if err != nil {
		return nil, err
	}
	n := len(c)
	out := make([]int, n)
	frac := make([]float64, n)
	sum := 0
	for i := range c {
		q := math.Min(c[i]*t, float64(k))
		out[i] = int(math.Floor(q + 1e-9))
		if out[i] > k {
			out[i] = k
		}
		frac[i] = q - float64(out[i])
		sum += out[i]
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return frac[order[a]] > frac[order[b]] })
	total := (s + 1) * k
	for pass := 0; sum < total; pass++ {
		progressed := false
		for _, i := range order {
			if sum == total {
				break
			}
			if out[i] < k {
				out[i]++
				sum++
				progressed = true
			}
		}
		if !progressed {
			return nil, fmt.Errorf("%w: cannot place %d copies on %d workers of capacity %d", ErrInvalidConfig, total, n, k)
		}
	}
	for sum > total { // rounding overshoot; take from the smallest remainders
		for j := n - 1; j >= 0 && sum > total; j-- {
			if i := order[j]; out[i] > 0 {
				out[i]--
				sum--
			}
		}
	}
	return out, nil
}

// loadImbalance is max_i load_i/c_i divided by the Theorem-5 bound.
func loadImbalance(load []int, c []float64, s, k int) float64 {
	t, err := OptimalComputeTime(c, s, k)
	if err != nil || t == 0 {
		return math.Inf(1)
	}
	worst := 0.0
	for i, l := range load {
		worst = math.Max(worst, float64(l)/c[i])
	}
	return worst / t
}

// autoPartitions picks k in [n, 3n] among those whose rounded loads are
// within 2% of the best balance in that range (by loadImbalance). With
// fewColours it prefers the k whose conflict graph needs the fewest colours
// beyond s+1 (extra colours are what costs conditioning in structured plans),
// then the smallest k (smaller B, cheaper decodes).
func autoPartitions(c []float64, s int, fewColours bool) int {
	n := len(c)
	imb := make([]float64, 3*n+1)
	best := math.Inf(1)
	for k := n; k <= 3*n; k++ {
		imb[k] = math.Inf(1)
		if l, err := loads(c, s, k); err == nil {
			imb[k] = loadImbalance(l, c, s, k)
		}
		best = math.Min(best, imb[k])
	}
	bestK, bestExtra := n, math.MaxInt
	for k := n; k <= 3*n; k++ {
		if !(imb[k] <= best*1.02) {
			continue
		}
		if !fewColours {
			return k
		}
		l, _ := loads(c, s, k)
		assign := cyclicCopies(l, k)
		var members []int
		for i, x := range l {
			if x > 0 {
				members = append(members, i)
			}
		}
		_, count := conflictColouring(n, members, holders(assign, k))
		if extra := count - (s + 1); extra < bestExtra {
			bestK, bestExtra = k, extra
		}
	}
	return bestK
}

// cyclicCopies lays (s+1)·k copies out cyclically (Alg. 1): worker i gets the
// load[i] consecutive copies after those of workers 0…i-1, copy t being
// partition t mod k. It returns each worker's partitions in copy order.
func cyclicCopies(load []int, k int) [][]int {
	out := make([][]int, len(load))
	start := 0
	for i, l := range load {
		out[i] = make([]int, l)
		for t := 0; t < l; t++ {
			out[i][t] = (start + t) % k
		}
		start += l
	}
	return out
}

// tandonSupport is the cyclic scheme's assignment: worker i holds
// {i, …, i+s} mod n, in that order.
func tandonSupport(n, s int) [][]int {
	out := make([][]int, n)
	for i := range out {
		out[i] = make([]int, s+1)
		for t := 0; t <= s; t++ {
			out[i][t] = (i + t) % n
		}
	}
	return out
}

// holders inverts an assignment: for each of k partitions, the workers that
// hold it, in ascending rank order.
func holders(assign [][]int, k int) [][]int {
	out := make([][]int, k)
	for i, parts := range assign {
		for _, p := range parts {
			out[p] = append(out[p], i)
		}
	}
	return out
}
