package balance

import (
	"container/heap"
	"fmt"
	"math"
)

// RankSpeed describes one rank for ADJUST_BS (AntDT Eq. 3).
type RankSpeed struct {
	// Speed is the rank's throughput v_i in samples per second; it must be
	// positive and finite.
	Speed float64
	// MinBatch is the smallest batch the rank may be given (0 = none).
	MinBatch int
	// MaxBatch is the largest batch the rank may be given (0 = unbounded).
	MaxBatch int
}

// maxBatch returns the effective upper bound, math.MaxInt for unbounded.
func (r RankSpeed) maxBatch() int {
	if r.MaxBatch <= 0 {
		return math.MaxInt
	}
	return r.MaxBatch
}

func validateRankSpeeds(ranks []RankSpeed) error {
	if len(ranks) == 0 {
		return fmt.Errorf("%w: no ranks", ErrInvalidInput)
	}
	for i, r := range ranks {
		if !(r.Speed > 0) || math.IsInf(r.Speed, 0) {
			return fmt.Errorf("%w: rank %d speed %v must be positive and finite", ErrInvalidInput, i, r.Speed)
		}
		if r.MinBatch < 0 || r.MaxBatch < 0 {
			return fmt.Errorf("%w: rank %d has negative batch bound", ErrInvalidInput, i)
		}
		if r.MaxBatch > 0 && r.MinBatch > r.MaxBatch {
			return fmt.Errorf("%w: rank %d min batch %d > max batch %d", ErrInfeasible, i, r.MinBatch, r.MaxBatch)
		}
	}
	return nil
}

// BatchTime is the predicted batch processing time B/v of a rank.
func BatchTime(batch int, speed float64) float64 { return float64(batch) / speed }

// AdjustBS solves AntDT Eq. 3 exactly over the integers:
//
//	min z  s.t.  z ≥ B_i/v_i,  Σ B_i = global,  MinBatch_i ≤ B_i ≤ MaxBatch_i.
//
// The k-th sample given to rank i "costs" k/v_i; an optimal assignment takes
// the global−ΣMinBatch cheapest costs above the minimums, which a
// unit-by-unit greedy does. To stay O(n log n) regardless of the batch size,
// the greedy is started from the largest level z₀ (found by bisection) at
// which every rank can be filled to ⌊z₀·v_i⌋ without exceeding the global
// batch; at most a few units per rank remain for the heap. Ties go to the
// lower rank index, so the output is deterministic.
//
// It returns ErrInfeasible when ΣMinBatch > global or ΣMaxBatch < global.
func AdjustBS(global int, ranks []RankSpeed) ([]int, error) {
	if err := validateRankSpeeds(ranks); err != nil {
		return nil, err
	}
	if global < 0 {
		return nil, fmt.Errorf("%w: negative global batch %d", ErrInvalidInput, global)
	}
	sumMin, sumMax := 0, 0
	for _, r := range ranks {
		sumMin = satAdd(sumMin, r.MinBatch)
		sumMax = satAdd(sumMax, r.maxBatch())
	}
	if sumMin > global {
		return nil, fmt.Errorf("%w: minimum batches sum to %d > global batch %d", ErrInfeasible, sumMin, global)
	}
	if sumMax < global {
		return nil, fmt.Errorf("%w: maximum batches sum to %d < global batch %d", ErrInfeasible, sumMax, global)
	}

	fill := func(z float64, out []int) int {
		total := 0
		for i, r := range ranks {
			b := r.MinBatch
			if f := math.Floor(z * r.Speed); f > float64(b) {
				if f >= float64(r.maxBatch()) {
					b = r.maxBatch()
				} else {
					b = int(f)
				}
			}
			if out != nil {
				out[i] = b
			}
			total = satAdd(total, b)
		}
		return total
	}

	// Bisection for a level z0 with fill(z0) ≤ global.
	lo, hi := 0.0, 0.0
	for _, r := range ranks {
		// A level at which every rank reaches min(max, global) samples.
		cap := r.maxBatch()
		if cap > global {
			cap = global
		}
		hi = math.Max(hi, float64(cap+1)/r.Speed)
	}
	for range 64 {
		mid := lo + (hi-lo)/2
		if mid <= lo || mid >= hi {
			break
		}
		if fill(mid, nil) <= global {
			lo = mid
		} else {
			hi = mid
		}
	}
	batches := make([]int, len(ranks))
	remaining := global - fill(lo, batches)

	h := make(unitHeap, 0, len(ranks))
	for i, r := range ranks {
		if batches[i] < r.maxBatch() {
			h = append(h, unitCost{cost: BatchTime(batches[i]+1, r.Speed), rank: i})
		}
	}
	heap.Init(&h)
	for ; remaining > 0; remaining-- {
		u := h[0]
		batches[u.rank]++
		if batches[u.rank] < ranks[u.rank].maxBatch() {
			h[0].cost = BatchTime(batches[u.rank]+1, ranks[u.rank].Speed)
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	return batches, nil
}

func satAdd(a, b int) int {
	if a > math.MaxInt-b {
		return math.MaxInt
	}
	return a + b
}

// unitCost is the time at which rank would finish if given one more sample.
type unitCost struct {
	cost float64
	rank int
}

// unitHeap is a min-heap of unitCost ordered by (cost, rank).
type unitHeap []unitCost

func (h unitHeap) Len() int { return len(h) }
func (h unitHeap) Less(i, j int) bool {
	if h[i].cost != h[j].cost {
		return h[i].cost < h[j].cost
	}
	return h[i].rank < h[j].rank
}
func (h unitHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }

// Push implements heap.Interface.
func (h *unitHeap) Push(x any) { *h = append(*h, x.(unitCost)) }

// Pop implements heap.Interface.
func (h *unitHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
