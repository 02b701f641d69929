package straggler

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/ringtail-ml/ringtail/topology"
)

// ErrOutOfOrder is wrapped when a Report is not of the step the Policy
// expects next.
var ErrOutOfOrder = errors.New("straggler: report out of order")

// Policy names, for Preset and the command-line tools.
const (
	// NameBSP is the plain ring over all ranks with equal shares.
	NameBSP = "bsp"
	// NameAdaptive is everything a job that can take any number of
	// samples per step can use: shares proportional to predicted speed, a
	// compute budget, and the mode chosen by predicted time to the same
	// training progress among the ring, the exact overlap, the exact
	// eviction (the evicted ranks' rows go to the members) and STAR's
	// eviction, whose stale gradients are priced by what they buy.
	NameAdaptive = "adaptive"
	// NameShares is shares without the budget, and the exact modes only —
	// the ring, the overlap and the exact eviction — so that training
	// follows synchronous SGD's curve (what a job with a fixed data
	// order, like examples/train, uses by default).
	NameShares = "shares"
	// NameSTAR is STAR's eviction alone: equal shares, evicted ranks at
	// their own pace under a staleness bound (not exact: stale gradients,
	// and the rows of the steps a child skips are not trained on).
	NameSTAR = "star"
	// NameExact is the exact mode alone: no staleness, no shares; a late
	// rank's reduction overlaps the others' reduce-scatter.
	NameExact = "exact"
)

// Names returns the preset names.
func Names() []string { return []string{NameBSP, NameAdaptive, NameShares, NameSTAR, NameExact} }

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
	// DefaultEWMAAlpha smooths the EWMA predictor and RLS's fallback.
	DefaultEWMAAlpha = 0.5
	// DefaultRLSForgetting is the RLS forgetting factor (memory ≈ 100 steps).
	DefaultRLSForgetting = 0.99
	// DefaultSpeedAlpha smooths the overhead and child-cycle estimates.
	DefaultSpeedAlpha = 0.5
	// DefaultCollectiveAlpha smooths the reduction-time estimate.
	DefaultCollectiveAlpha = 0.3
	// DefaultHysteresis is Config.Hysteresis's default.
	DefaultHysteresis = 0.03
	// DefaultModeHysteresis is Config.ModeHysteresis's default.
	DefaultModeHysteresis = 0.1
	// DefaultMaxStaleness is Config.MaxStaleness's default.
	DefaultMaxStaleness = 8
	// DefaultNoiseAlpha is Config.NoiseAlpha's default.
	DefaultNoiseAlpha = 0.1
	// DefaultReassignAt is Config.ReassignAt's default: in-step
	// reassignment costs a few percent of a step where predictions hold
	// (docs/reassign.md), so it is chosen once they miss by more than
	// twice that.
	DefaultReassignAt = 0.08
)

// Config configures a Policy. Zero fields take defaults (WithDefaults);
// World and GlobalBatch are required.
type Config struct {
	// World is N, the number of ranks.
	World int `json:"world"`
	// GlobalBatch is M, the samples of one step summed over all ranks.
	GlobalBatch int `json:"global_batch"`
	// Shares gives each rank a batch share proportional to its predicted
	// speed (AntDT ADJUST_BS); otherwise shares are equal.
	Shares bool `json:"shares"`
	// Budget gives every rank the same compute time, M / Σ predicted speed
	// (× 1+Slack): a rank computes until it is spent and reports how many
	// samples it finished. Requires Shares.
	Budget bool `json:"budget"`
	// Evict lets the policy evict ranks into parents, where they compute
	// at their own pace (STAR), when that is predicted to make faster
	// progress (slow compute that shares cannot balance, or a slow link).
	Evict bool `json:"evict"`
	// Exclude lets the policy take ranks out of the ring and give their
	// rows to the members (ModeExclude): exact, when that is predicted
	// faster — a rank behind a slow link, or stalled.
	Exclude bool `json:"exclude,omitempty"`
	// DiscountStale prices an evicted child's gradients by the progress
	// they buy, 1/(1+τ) of a fresh one's for staleness τ (ModeInput).
	DiscountStale bool `json:"discount_stale,omitempty"`
	// Overlap lets the policy choose the exact mode: the others
	// reduce-scatter while the rank predicted last is still computing.
	Overlap bool `json:"overlap"`
	// Slack stretches the budget by this fraction (default 0).
	Slack float64 `json:"slack,omitempty"`
	// Hysteresis keeps the shares in effect unless new ones are predicted
	// to shorten the slowest rank's compute by more than this fraction.
	Hysteresis float64 `json:"hysteresis,omitempty"`
	// ModeHysteresis keeps the mode in effect unless another is predicted
	// cheaper by more than this fraction: a mode change costs work (a
	// rejoining child waits for parameters).
	ModeHysteresis float64 `json:"mode_hysteresis,omitempty"`
	// MinShare is the smallest share a rank gets (default 1 when M ≥ N
	// with Shares, else 0).
	MinShare int `json:"min_share,omitempty"`
	// SpeedAlpha smooths the overhead and child-cycle estimates;
	// CollectiveAlpha the reduction-time estimate.
	SpeedAlpha      float64 `json:"speed_alpha,omitempty"`
	CollectiveAlpha float64 `json:"collective_alpha,omitempty"`
	// Predictor forecasts each rank's per-sample time (default EWMA; RLS
	// regresses on the rank's telemetry).
	Predictor PredictorKind `json:"predictor,omitempty"`
	// EWMAAlpha smooths the EWMA predictor; RLSForgetting is RLS's
	// forgetting factor.
	EWMAAlpha     float64 `json:"ewma_alpha,omitempty"`
	RLSForgetting float64 `json:"rls_forgetting,omitempty"`
	// Phi fixes the gradient noise scale φ of Eq. 3, in samples. Zero (the
	// default) estimates it online from the reports' gradient norms
	// (McCandlish et al.'s simple noise scale, B_simple = tr Σ / |G|²,
	// from every member's gradient and the reduced one), M until measured.
	Phi float64 `json:"phi,omitempty"`
	// NoiseAlpha smooths the noise-scale estimate's two parts (default
	// 0.1: they are noisy).
	NoiseAlpha float64 `json:"noise_alpha,omitempty"`
	// Threshold is the straggler deviation ratio (default 0.2).
	Threshold float64 `json:"threshold,omitempty"`
	// MaxEvictFraction caps evictions at this fraction of World (0.5).
	MaxEvictFraction float64 `json:"max_evict_fraction,omitempty"`
	// MaxStaleness caps the staleness bound K (default 8).
	MaxStaleness int `json:"max_staleness,omitempty"`
	// MaxChildren caps the children of one parent (0: no cap beyond what
	// balance needs; topology spreads children over parents).
	MaxChildren int `json:"max_children,omitempty"`
	// Bandwidth is the measured link bandwidth between ranks (bytes/s,
	// from Comm.Probe): it predicts the reduction time of any ring and
	// chooses parents. Nil: unmeasured (one host).
	Bandwidth topology.Matrix `json:"-"`
	// GradBytes is the size of the reduced buffer, for the link model.
	GradBytes int `json:"grad_bytes,omitempty"`
	// Lambda, ShortWindow and LongWindow configure AntDT classification
	// (Monitor); Prior seeds it with static slowdowns (device priors).
	Lambda                  float64   `json:"lambda,omitempty"`
	ShortWindow, LongWindow int       `json:",omitempty"`
	Prior                   []float64 `json:"prior,omitempty"`
	// Reassign tells the policy that its caller can run a step under
	// in-step work reassignment (driver.Reassign): a plan whose every
	// rank is in the ring then says whether to (Plan.Reassign), priced by
	// ReassignAt.
	Reassign bool `json:"reassign,omitempty"`
	// ReassignAt is the surprise — how much later than predicted the
	// slowest rank would have finished its share, smoothed over the
	// recent steps, as a fraction of the predicted compute — at which
	// plans reassign (default DefaultReassignAt; they go on until it
	// falls below half of it; until three steps' surprise is measured,
	// every plan reassigns). Shares remove what is predicted, in-step
	// reassignment what is not, at a cost of its own; a plan that
	// reassigns on its surprise weighs only the modes that keep every
	// rank in the ring. A negative value reassigns every step whose plan
	// keeps every rank in the ring, the other modes weighed as without
	// reassignment.
	ReassignAt float64 `json:"reassign_at,omitempty"`
	// Memory bounds each rank's micro-batch by its device's memory
	// (AntDT-DD, accumulation.go); nil: no bound, one pass per share.
	Memory *Memory `json:"memory,omitempty"`
}

// Preset returns the named policy for a world and global batch.
func Preset(name string, world, globalBatch int) (Config, error) {
	c := Config{World: world, GlobalBatch: globalBatch}
	switch name {
	case NameBSP:
	case NameAdaptive:
		c.Shares, c.Budget, c.Evict, c.Overlap, c.Exclude, c.DiscountStale = true, true, true, true, true, true
	case NameShares:
		c.Shares, c.Overlap, c.Exclude = true, true, true
	case NameSTAR:
		c.Evict = true
	case NameExact:
		c.Overlap = true
	default:
		return c, fmt.Errorf("straggler: unknown policy %q (want one of %s): %w", name, strings.Join(Names(), ", "), ErrInvalidConfig)
	}
	return c, nil
}

// WithDefaults returns c with zero fields replaced by their defaults.
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
	set(&c.SpeedAlpha, DefaultSpeedAlpha)
	set(&c.CollectiveAlpha, DefaultCollectiveAlpha)
	set(&c.Hysteresis, DefaultHysteresis)
	set(&c.ModeHysteresis, DefaultModeHysteresis)
	set(&c.NoiseAlpha, DefaultNoiseAlpha)
	set(&c.ReassignAt, DefaultReassignAt)
	set(&c.Threshold, DefaultThreshold)
	set(&c.MaxEvictFraction, DefaultMaxEvictFraction)
	set(&c.Lambda, DefaultLambda)
	set(&c.EWMAAlpha, DefaultEWMAAlpha)
	set(&c.RLSForgetting, DefaultRLSForgetting)
	seti(&c.ShortWindow, DefaultShortWindow)
	seti(&c.LongWindow, DefaultLongWindow)
	seti(&c.MaxStaleness, DefaultMaxStaleness)
	if c.MinShare == 0 && c.Shares && c.GlobalBatch >= c.World {
		c.MinShare = 1
	}
	return c
}

// Validate checks a configuration after WithDefaults.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("straggler: "+format+": %w", append(args, ErrInvalidConfig)...)
	}
	unit := func(f float64) bool { return f > 0 && f <= 1 }
	switch {
	case c.World < 1:
		return bad("world %d must be ≥ 1", c.World)
	case c.GlobalBatch < 1:
		return bad("global batch %d must be ≥ 1", c.GlobalBatch)
	case c.Budget && !c.Shares:
		return bad("a compute budget needs shares")
	case !(c.Slack >= 0) || math.IsInf(c.Slack, 0):
		return bad("slack %v must be finite and ≥ 0", c.Slack)
	case !(c.Hysteresis >= 0 && c.Hysteresis < 1) || !(c.ModeHysteresis >= 0 && c.ModeHysteresis < 1):
		return bad("hysteresis %v and mode hysteresis %v must be in [0,1)", c.Hysteresis, c.ModeHysteresis)
	case c.MinShare < 0 || c.MinShare*c.World > c.GlobalBatch:
		return bad("min share %d × world %d exceeds global batch %d (or is negative)", c.MinShare, c.World, c.GlobalBatch)
	case !unit(c.SpeedAlpha) || !unit(c.CollectiveAlpha):
		return bad("speed alpha %v and collective alpha %v must be in (0,1]", c.SpeedAlpha, c.CollectiveAlpha)
	case !(c.Phi >= 0) || math.IsInf(c.Phi, 0):
		return bad("φ=%v must be finite and ≥ 0 (0: estimated)", c.Phi)
	case !unit(c.NoiseAlpha):
		return bad("noise alpha %v must be in (0,1]", c.NoiseAlpha)
	case !(c.Threshold > 0) || math.IsInf(c.Threshold, 0):
		return bad("threshold %v must be finite and > 0", c.Threshold)
	case !(c.MaxEvictFraction > 0 && c.MaxEvictFraction < 1):
		return bad("max evict fraction %v not in (0,1)", c.MaxEvictFraction)
	case c.MaxStaleness < 1:
		return bad("max staleness %d must be ≥ 1", c.MaxStaleness)
	case c.MaxChildren < 0:
		return bad("max children %d must be ≥ 0", c.MaxChildren)
	case c.GradBytes < 0:
		return bad("gradient of %d bytes", c.GradBytes)
	case math.IsNaN(c.ReassignAt) || math.IsInf(c.ReassignAt, 0):
		return bad("reassign-at %v must be finite", c.ReassignAt)
	case c.Predictor != PredictRLS && c.Predictor != PredictEWMA:
		return bad("unknown predictor %v", c.Predictor)
	case c.Bandwidth != nil && len(c.Bandwidth) != c.World:
		return bad("bandwidth matrix of %d rows for %d ranks", len(c.Bandwidth), c.World)
	}
	if err := c.Memory.validate(c.World, c.GlobalBatch, c.MinShare); err != nil {
		return err
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

// maxEvict is the cap on evicted ranks.
func (c Config) maxEvict() int {
	return min(c.World-1, int(math.Floor(c.MaxEvictFraction*float64(c.World))), topology.MaxEvicted)
}
