package straggler

import (
	"fmt"
	"math"
	"time"
)

// Defaults applied by Config.WithDefaults to zero fields.
const (
	// DefaultLambda is AntDT's slowness ratio λ (§VII-A5).
	DefaultLambda = 1.5
	// DefaultShortWindow is L_trans in steps.
	DefaultShortWindow = 5
	// DefaultLongWindow is L_per in steps.
	DefaultLongWindow = 50
	// DefaultThreshold is the STAR/FlexRR straggler deviation ratio.
	DefaultThreshold = 0.2
	// DefaultMaxEvictFraction caps evictions at half the world.
	DefaultMaxEvictFraction = 0.5
	// DefaultEWMAAlpha smooths the EWMA predictor.
	DefaultEWMAAlpha = 0.5
	// DefaultRLSForgetting is the RLS forgetting factor (memory ≈ 100 steps).
	DefaultRLSForgetting = 0.99
	// DefaultCollectiveAlpha smooths the collective-duration estimate.
	DefaultCollectiveAlpha = 0.3
	// DefaultStalenessBound bounds how late a carried gradient may be.
	DefaultStalenessBound = 1
	// DefaultLead makes a plan decided at step s apply to step s+1.
	DefaultLead = 1
	// DefaultMaxAhead is how many steps past the open one are buffered.
	DefaultMaxAhead = 4
	// DefaultStepTimeoutTicks closes a step after this many ticks.
	DefaultStepTimeoutTicks = 10
)

// Config configures a Controller. Zero fields take the defaults above
// (WithDefaults); World and GlobalBatch are required.
type Config struct {
	// World is N, the number of ranks.
	World int
	// GlobalBatch is M, the samples of one step summed over all ranks.
	GlobalBatch int
	// Phi is the gradient noise scale φ in samples. 0 means φ = M (the
	// job is assumed to train near its critical batch size); SetPhi
	// replaces it at run time, e.g. from a GNSEstimator.
	Phi float64
	// Lambda is AntDT's slowness ratio λ.
	Lambda float64
	// ShortWindow and LongWindow are L_trans and L_per, in steps.
	ShortWindow, LongWindow int
	// Prior is an optional static slowdown per rank (see MonitorConfig).
	Prior []float64
	// Threshold is the straggler deviation ratio (0.2).
	Threshold float64
	// MaxEvictFraction caps x at this fraction of World.
	MaxEvictFraction float64
	// WaitCandidates are extra t_w values for ChooseMode.
	WaitCandidates []time.Duration
	// Predictor selects the arrival predictor (default RLS).
	Predictor PredictorKind
	// EWMAAlpha smooths the EWMA predictor and RLS's fallback.
	EWMAAlpha float64
	// RLSForgetting is RLS's forgetting factor.
	RLSForgetting float64
	// CollectiveAlpha smooths the collective-duration estimate.
	CollectiveAlpha float64
	// StalenessBound is the most steps a carried gradient may lag (≥ 1).
	StalenessBound int
	// Lead is 1 or 2: observations of step s decide the plan of s+Lead.
	Lead int
	// MaxAhead is how many steps past the open step are buffered.
	MaxAhead int
	// StepTimeoutTicks closes the open step after that many Ticks even if
	// some ranks never reported; negative disables the timeout.
	StepTimeoutTicks int
}

// WithDefaults returns c with zero fields replaced by the defaults.
func (c Config) WithDefaults() Config {
	set := func(f *float64, d float64) {
		if *f == 0 {
			*f = d
		}
	}
	seti := func(f *int, d int) {
		if *f == 0 {
			*f = d
		}
	}
	set(&c.Phi, float64(c.GlobalBatch))
	set(&c.Lambda, DefaultLambda)
	seti(&c.ShortWindow, DefaultShortWindow)
	seti(&c.LongWindow, DefaultLongWindow)
	set(&c.Threshold, DefaultThreshold)
	set(&c.MaxEvictFraction, DefaultMaxEvictFraction)
	set(&c.EWMAAlpha, DefaultEWMAAlpha)
	set(&c.RLSForgetting, DefaultRLSForgetting)
	set(&c.CollectiveAlpha, DefaultCollectiveAlpha)
	seti(&c.StalenessBound, DefaultStalenessBound)
	seti(&c.Lead, DefaultLead)
	seti(&c.MaxAhead, DefaultMaxAhead)
	seti(&c.StepTimeoutTicks, DefaultStepTimeoutTicks)
	return c
}

// Validate checks a configuration after WithDefaults.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("straggler: "+format+": %w", append(args, ErrInvalidConfig)...)
	}
	switch {
	case c.World < 1:
		return bad("world %d must be ≥ 1", c.World)
	case c.GlobalBatch < 1:
		return bad("global batch %d must be ≥ 1", c.GlobalBatch)
	case !(c.Phi > 0) || math.IsInf(c.Phi, 0):
		return bad("φ=%v must be finite and > 0", c.Phi)
	case !(c.Threshold > 0) || math.IsInf(c.Threshold, 0):
		return bad("threshold %v must be finite and > 0", c.Threshold)
	case !(c.MaxEvictFraction > 0 && c.MaxEvictFraction < 1):
		return bad("max evict fraction %v not in (0,1)", c.MaxEvictFraction)
	case c.Predictor != PredictEWMA && c.Predictor != PredictRLS:
		return bad("unknown predictor %v", c.Predictor)
	case !(c.CollectiveAlpha > 0 && c.CollectiveAlpha <= 1):
		return bad("collective alpha %v not in (0,1]", c.CollectiveAlpha)
	case c.StalenessBound < 1:
		return bad("staleness bound %d must be ≥ 1", c.StalenessBound)
	case c.Lead != 1 && c.Lead != 2:
		return bad("lead %d must be 1 or 2", c.Lead)
	case c.MaxAhead < 1:
		return bad("max ahead %d must be ≥ 1", c.MaxAhead)
	}
	for _, w := range c.WaitCandidates {
		if w <= 0 {
			return bad("wait candidate %v must be > 0", w)
		}
	}
	if _, err := NewEWMA(c.EWMAAlpha); err != nil {
		return fmt.Errorf("straggler: %w", err)
	}
	if _, err := NewRLS(c.RLSForgetting, c.EWMAAlpha); err != nil {
		return fmt.Errorf("straggler: %w", err)
	}
	return c.monitorConfig().Validate()
}

func (c Config) monitorConfig() MonitorConfig {
	return MonitorConfig{World: c.World, ShortWindow: c.ShortWindow, LongWindow: c.LongWindow, Lambda: c.Lambda, Prior: c.Prior}
}

// maxEvict is X's cap for the world.
func (c Config) maxEvict() int {
	return int(math.Floor(c.MaxEvictFraction * float64(c.World)))
}

func (c Config) newPredictor() Predictor {
	if c.Predictor == PredictEWMA {
		p, _ := NewEWMA(c.EWMAAlpha) // validated
		return p
	}
	p, _ := NewRLS(c.RLSForgetting, c.EWMAAlpha) // validated
	return p
}
