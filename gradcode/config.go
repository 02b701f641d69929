package gradcode

import (
	"fmt"
	"math"
)

// Scheme names a gradient-coding scheme.
type Scheme string

// The schemes a Plan can follow.
const (
	// Cyclic is Tandon et al.'s cyclic repetition scheme: k = n partitions,
	// worker i holds partitions {i, …, i+s} mod n.
	Cyclic Scheme = "cyclic"
	// Hetero is the heterogeneity-aware scheme (Alg. 1): loads proportional to
	// throughput, (s+1)·k copies assigned cyclically.
	Hetero Scheme = "hetero"
	// Group is the group-based variant (Alg. 2/3) on the Hetero assignment:
	// exact-cover groups decode with 0/1 coefficients.
	Group Scheme = "group"
	// Custom marks a plan built from an explicit B by PlanFromB.
	Custom Scheme = "custom"
)

// Construction names how B (or the auxiliary matrix behind it) is chosen.
type Construction string

// The constructions a Config can ask for.
const (
	// Structured is the default: a proper colouring of the workers' conflict
	// graph and a small designed palette for the auxiliary matrix; when the
	// colour classes are exact covers B is 0/1 and decoding is 0/1 too.
	Structured Construction = "structured"
	// Random follows the papers literally: a random H with H·1 = 0 for
	// Cyclic (Tandon), a uniformly random auxiliary matrix for Hetero and for
	// the non-group workers of Group (Lemma 3). It is the baseline whose poor
	// conditioning motivates Structured.
	Random Construction = "random"
	// Explicit marks plans built from a caller-supplied H or B.
	Explicit Construction = "explicit"
)

// DType is the wire type of coded payloads.
type DType string

// The payload types a plan can prescribe.
const (
	Float32 DType = "float32"
	Float64 DType = "float64"
)

// Default relative-error targets for the decoded gradient sum when payloads
// are rounded to their wire type (see Quality).
const (
	// TargetRelErrSmall applies to plans with N ≤ 16.
	TargetRelErrSmall = 1e-5
	// TargetRelErrLarge applies to plans with N > 16.
	TargetRelErrLarge = 1e-4
)

// Config describes the plan to build. The zero values of optional fields pick
// documented defaults; the same Config always yields the same Plan.
type Config struct {
	// Scheme is Cyclic, Hetero or Group.
	Scheme Scheme
	// N is the number of workers (ranks), N ≥ 1.
	N int
	// S is the number of stragglers to tolerate, 0 ≤ S < N.
	S int
	// K is the number of data partitions. Cyclic requires K = N (0 means N).
	// For Hetero and Group, 0 picks, among the K in [N, 3N] whose integer
	// loads are within 2% of the best balance against the throughputs, the
	// one needing the fewest colours (Structured), then the smallest.
	K int
	// Throughputs are the measured partitions-per-second of each worker
	// (len N, all > 0). Nil means all equal. Cyclic ignores them except for
	// validation.
	Throughputs []float64
	// Seed drives every random choice (random H draws, palette draws and the
	// sampled straggler patterns of the quality check).
	Seed int64
	// Construction is Structured (default) or Random.
	Construction Construction
	// TargetRelErr is the relative error the decoded sum must stay within
	// when payloads are float32; 0 means TargetRelErrSmall for N ≤ 16 and
	// TargetRelErrLarge above.
	TargetRelErr float64
	// PayloadDType forces the payload type; "" lets the plan choose from its
	// measured quality.
	PayloadDType DType
}

// maxWorkers bounds N so that dense n×k matrices stay small.
const maxWorkers = 4096

// Validate reports whether c describes a buildable plan. Errors wrap
// ErrInvalidConfig.
func (c Config) Validate() error {
	switch c.Scheme {
	case Cyclic, Hetero, Group:
	default:
		return fmt.Errorf("%w: unknown scheme %q (want cyclic, hetero or group)", ErrInvalidConfig, c.Scheme)
	}
	if c.N < 1 || c.N > maxWorkers {
		return fmt.Errorf("%w: n = %d, want 1 ≤ n ≤ %d", ErrInvalidConfig, c.N, maxWorkers)
	}
	if c.S < 0 || c.S >= c.N {
		return fmt.Errorf("%w: s = %d, want 0 ≤ s < n = %d", ErrInvalidConfig, c.S, c.N)
	}
	if c.K < 0 {
		return fmt.Errorf("%w: k = %d, want k ≥ 0", ErrInvalidConfig, c.K)
	}
	if c.Scheme == Cyclic && c.K != 0 && c.K != c.N {
		return fmt.Errorf("%w: cyclic scheme needs k = n = %d, got k = %d", ErrInvalidConfig, c.N, c.K)
	}
	if c.K > 64*maxWorkers {
		return fmt.Errorf("%w: k = %d is too large", ErrInvalidConfig, c.K)
	}
	if c.Throughputs != nil {
		if len(c.Throughputs) != c.N {
			return fmt.Errorf("%w: %d throughputs for n = %d workers", ErrInvalidConfig, len(c.Throughputs), c.N)
		}
		for i, t := range c.Throughputs {
			if !(t > 0) || math.IsInf(t, 0) {
				return fmt.Errorf("%w: throughput of worker %d is %v, want a finite value > 0", ErrInvalidConfig, i, t)
			}
		}
	}
	switch c.Construction {
	case "", Structured, Random:
	default:
		return fmt.Errorf("%w: unknown construction %q (want structured or random)", ErrInvalidConfig, c.Construction)
	}
	if c.TargetRelErr < 0 || math.IsNaN(c.TargetRelErr) || math.IsInf(c.TargetRelErr, 0) {
		return fmt.Errorf("%w: target relative error %v, want a finite value ≥ 0", ErrInvalidConfig, c.TargetRelErr)
	}
	switch c.PayloadDType {
	case "", Float32, Float64:
	default:
		return fmt.Errorf("%w: unknown payload dtype %q (want float32 or float64)", ErrInvalidConfig, c.PayloadDType)
	}
	return nil
}

// throughputs returns the configured throughputs, or all ones.
func (c Config) throughputs() []float64 {
	out := make([]float64, c.N)
	for i := range out {
		out[i] = 1
		if c.Throughputs != nil {
			out[i] = c.Throughputs[i]
		}
	}
	return out
}

// construction returns the configured construction with its default applied.
func (c Config) construction() Construction {
	if c.Construction == "" {
		return Structured
	}
	return c.Construction
}

// defaultTarget returns the relative-error target for n workers.
func defaultTarget(n int) float64 {
	if n <= 16 {
		return TargetRelErrSmall
	}
	return TargetRelErrLarge
}
