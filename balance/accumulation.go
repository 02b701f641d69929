package balance

import (
	"fmt"
	"math"
	"slices"
)

// DeviceClass is one series of identical devices for AntDT-DD (Eq. 4).
type DeviceClass struct {
	// Name labels the class in plans and errors ("V100").
	Name string
	// Count is n_i, the number of devices of this class (≥ 1).
	Count int
	// Speed is v_i, one device's throughput in samples per second.
	Speed float64
	// MinBatch is B̂_min: the throughput saturation point, below which the
	// batch time no longer shrinks (AntDT footnote 4). 0 allows idle devices.
	MinBatch int
	// MaxBatch is B̂_max: the largest batch that fits, see MaxBatchFromMemory.
	MaxBatch int
}

// AccumConfig holds the class-independent inputs of AntDT Eq. 4.
type AccumConfig struct {
	// GlobalBatch is B, the samples per synchronisation: Σ n_i·C_i·B_i = B.
	GlobalBatch int
	// MinAccum is Ĉ_min, the smallest accumulation count (usually 1).
	MinAccum int
	// MaxAccum is Ĉ_max, the largest accumulation count (e.g. 5).
	MaxAccum int
}

// Validate reports malformed configuration (wrapping ErrInvalidInput).
func (c AccumConfig) Validate() error {
	switch {
	case c.GlobalBatch <= 0:
		return fmt.Errorf("%w: global batch %d must be positive", ErrInvalidInput, c.GlobalBatch)
	case c.MinAccum < 1:
		return fmt.Errorf("%w: min accumulation %d must be ≥ 1", ErrInvalidInput, c.MinAccum)
	case c.MaxAccum < c.MinAccum:
		return fmt.Errorf("%w: max accumulation %d < min accumulation %d", ErrInvalidInput, c.MaxAccum, c.MinAccum)
	}
	return nil
}

// ClassPlan is the solved batch size and accumulation count of one class.
type ClassPlan struct {
	// Name is the DeviceClass name.
	Name string
	// Count is the number of devices of the class.
	Count int
	// Batch is B_i, the micro-batch each device computes per accumulation.
	Batch int
	// Accum is C_i, micro-batches per synchronisation.
	Accum int
	// StepS is C_i·B_i/v_i, the class's predicted time per synchronisation.
	StepS float64
}

// AccumPlan is the solution of AntDT Eq. 4.
type AccumPlan struct {
	// Classes are in input order.
	Classes []ClassPlan
	// StepS is the objective max_i C_i·B_i/v_i in seconds.
	StepS float64
}

// AdjustBSAccum solves AntDT Eq. 4 exactly:
//
//	min max_i C_i·B_i/v_i
//	s.t. Σ_i n_i·C_i·B_i = B,  B̂_min,i ≤ B_i ≤ B̂_max,i,  Ĉ_min ≤ C_i ≤ Ĉ_max.
//
// The paper solves it "using the latent variable of Eq. 3"; here the
// per-device work w_i = C_i·B_i is that latent variable. The optimum is one
// of the values w/v_i, so the solver binary-searches the sorted candidate
// values; for a candidate z it decides, with a bitset dynamic program over
// partial sums 0..B, whether classes can pick w_i ≤ z·v_i that sum exactly
// to B (each C_i contributes the arithmetic progression n_i·C_i·B_i,
// B_i ∈ [B̂_min, B̂_max], added with O(log) shifted copies). Among optimal
// solutions it walks the classes from last to first and prefers the
// smallest C_i, then the largest B_i (fewest accumulation passes).
//
// It returns an error wrapping ErrInfeasible, naming the nearest reachable
// global batch below B, when no choice sums exactly to B.
func AdjustBSAccum(cfg AccumConfig, classes []DeviceClass) (AccumPlan, error) {
	if err := cfg.Validate(); err != nil {
		return AccumPlan{}, err
	}
	if len(classes) == 0 {
		return AccumPlan{}, fmt.Errorf("%w: no device classes", ErrInvalidInput)
	}
	for i, c := range classes {
		switch {
		case c.Count < 1:
			return AccumPlan{}, fmt.Errorf("%w: class %d (%s) count %d must be ≥ 1", ErrInvalidInput, i, c.Name, c.Count)
		case !(c.Speed > 0) || math.IsInf(c.Speed, 0):
			return AccumPlan{}, fmt.Errorf("%w: class %d (%s) speed %v must be positive and finite", ErrInvalidInput, i, c.Name, c.Speed)
		case c.MinBatch < 0 || c.MaxBatch < 1:
			return AccumPlan{}, fmt.Errorf("%w: class %d (%s) batch bounds [%d, %d] invalid", ErrInvalidInput, i, c.Name, c.MinBatch, c.MaxBatch)
		case c.MinBatch > c.MaxBatch:
			return AccumPlan{}, fmt.Errorf("%w: class %d (%s) saturation point %d exceeds memory limit %d", ErrInfeasible, i, c.Name, c.MinBatch, c.MaxBatch)
		}
	}
	G := cfg.GlobalBatch

	// Candidate objective values w/v_i over every achievable per-device work.
	var cands []float64
	seen := make([]bool, 0)
	for _, c := range classes {
		wmax := G / c.Count
		seen = slices.Grow(seen[:0], wmax+1)[:wmax+1]
		clear(seen)
		for C := cfg.MinAccum; C <= cfg.MaxAccum; C++ {
			for B := c.MinBatch; B <= c.MaxBatch && C*B <= wmax; B++ {
				if !seen[C*B] {
					seen[C*B] = true
					cands = append(cands, BatchTime(C*B, c.Speed))
				}
			}
		}
	}
	slices.Sort(cands)
	cands = slices.Compact(cands)

	// Fluid lower bound: Σ n_i·w_i ≤ z·Σ n_i·v_i, so z < B/Σ n_i·v_i is
	// infeasible. Skip those candidates (with a relative margin for
	// rounding) so the binary search starts near the answer.
	capacity := 0.0
	for _, c := range classes {
		capacity += float64(c.Count) * c.Speed
	}
	lb := float64(G) / capacity * (1 - 1e-9)
	first, _ := slices.BinarySearch(cands, lb)
	if first > 0 && first < len(cands) {
		cands = cands[first:]
	}

	s := newAccumSolver(cfg, classes)
	if len(cands) == 0 || !s.feasible(cands[len(cands)-1], nil) {
		near := -1
		if len(cands) > 0 {
			near = s.last.highestAtMost(G)
		}
		return AccumPlan{}, fmt.Errorf("%w: no batch sizes and accumulation counts within bounds make Σ n_i·C_i·B_i = %d (nearest reachable global batch below: %d)", ErrInfeasible, G, near)
	}
	lo, hi := 0, len(cands)-1 // cands[hi] feasible
	for lo < hi {
		mid := lo + (hi-lo)/2
		if s.feasible(cands[mid], nil) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	z := cands[hi]
	prefix := make([]*sumSet, len(classes)+1)
	s.feasible(z, prefix)

	plan := AccumPlan{Classes: make([]ClassPlan, len(classes))}
	rest := G
	for i := len(classes) - 1; i >= 0; i-- {
		c := classes[i]
		C, B, ok := s.pick(i, z, rest, prefix[i])
		if !ok {
			// Unreachable: prefix sets prove a path exists.
			return AccumPlan{}, fmt.Errorf("balance: internal error reconstructing class %s", c.Name)
		}
		rest -= c.Count * C * B
		plan.Classes[i] = ClassPlan{Name: c.Name, Count: c.Count, Batch: B, Accum: C, StepS: BatchTime(C*B, c.Speed)}
		plan.StepS = math.Max(plan.StepS, plan.Classes[i].StepS)
	}
	return plan, nil
}

// accumSolver holds the reusable bitsets of AdjustBSAccum.
type accumSolver struct {
	cfg     AccumConfig
	classes []DeviceClass
	cur     *sumSet
	next    *sumSet
	work    *sumSet
	last    *sumSet
}

func newAccumSolver(cfg AccumConfig, classes []DeviceClass) *accumSolver {
	G := cfg.GlobalBatch
	return &accumSolver{cfg: cfg, classes: classes, cur: newSumSet(G), next: newSumSet(G), work: newSumSet(G), last: newSumSet(G)}
}

// maxBatchWithin returns the largest B with C·B/v ≤ z, evaluated with the
// same float expression as the candidates so the two agree exactly.
func maxBatchWithin(C int, v, z float64) int {
	b := int(math.Floor(z * v / float64(C)))
	for BatchTime(C*(b+1), v) <= z {
		b++
	}
	for b >= 0 && BatchTime(C*b, v) > z {
		b--
	}
	return b
}

// feasible reports whether the classes can sum exactly to the global batch
// with every class time ≤ z. If prefix is non-nil, prefix[i] receives the
// reachable sums after the first i classes.
func (s *accumSolver) feasible(z float64, prefix []*sumSet) bool {
	G := s.cfg.GlobalBatch
	s.cur.clear()
	s.cur.set(0)
	if prefix != nil {
		prefix[0] = s.cur.clone()
	}
	for i, c := range s.classes {
		s.next.clear()
		for C := s.cfg.MinAccum; C <= s.cfg.MaxAccum; C++ {
			hiB := min(c.MaxBatch, maxBatchWithin(C, c.Speed, z))
			if hiB < c.MinBatch {
				continue
			}
			orProgression(s.next, s.cur, c.Count*C*c.MinBatch, c.Count*C, hiB-c.MinBatch+1, s.work)
		}
		s.cur, s.next = s.next, s.cur
		if prefix != nil {
			prefix[i+1] = s.cur.clone()
		}
	}
	s.last.copyFrom(s.cur)
	return s.cur.has(G)
}

// pick chooses (C, B) for class i such that rest − n_i·C·B is reachable by
// the earlier classes, preferring the smallest C, then the largest B.
func (s *accumSolver) pick(i int, z float64, rest int, before *sumSet) (int, int, bool) {
	c := s.classes[i]
	for C := s.cfg.MinAccum; C <= s.cfg.MaxAccum; C++ {
		hiB := min(c.MaxBatch, maxBatchWithin(C, c.Speed, z))
		for B := hiB; B >= c.MinBatch; B-- {
			if before.has(rest - c.Count*C*B) {
				return C, B, true
			}
		}
	}
	return 0, 0, false
}
