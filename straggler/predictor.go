package straggler

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Predictor forecasts one rank's arrival time at the next step from its
// history. Implementations are deterministic and keep their state private.
type Predictor interface {
	// Observe feeds the rank's observation of the step just closed.
	Observe(o Observation)
	// Predict returns the forecast arrival of the next step, and false
	// while the predictor has seen nothing.
	Predict() (time.Duration, bool)
}

// PredictorKind names a Predictor implementation in a Config.
type PredictorKind int

const (
	// PredictEWMA selects the exponentially weighted moving average, the
	// default: it follows a change of speed within a few steps, where
	// RLS, fitted to the history before the change, extrapolates it.
	PredictEWMA PredictorKind = iota
	// PredictRLS selects recursive least squares on resource features
	// (CPU, GPU utilisation and clock): fewer false positives when the
	// telemetry carries the slowdown (docs/straggler.md).
	PredictRLS
)

// String returns "rls" or "ewma".
func (k PredictorKind) String() string {
	switch k {
	case PredictRLS:
		return "rls"
	case PredictEWMA:
		return "ewma"
	}
	return "PredictorKind(" + strconv.Itoa(int(k)) + ")"
}

// EWMA predicts the next arrival as an exponentially weighted moving
// average of past arrivals: m ← m + α·(a − m). It is the robust baseline:
// no features, one parameter, and it never extrapolates.
type EWMA struct {
	alpha float64
	mean  float64
	n     int
}

var _ Predictor = (*EWMA)(nil)

// NewEWMA returns an EWMA with smoothing factor alpha in (0, 1]; alpha = 1
// predicts the last value.
func NewEWMA(alpha float64) (*EWMA, error) {
	if !(alpha > 0 && alpha <= 1) {
		return nil, fmt.Errorf("ewma: alpha %v not in (0,1]: %w", alpha, ErrInvalidConfig)
	}
	return &EWMA{alpha: alpha}, nil
}

// Observe implements Predictor.
func (e *EWMA) Observe(o Observation) { e.update(float64(o.Arrival)) }

func (e *EWMA) update(v float64) {
	if e.n == 0 {
		e.mean = v
	} else {
		e.mean += e.alpha * (v - e.mean)
	}
	e.n++
}

// Predict implements Predictor.
func (e *EWMA) Predict() (time.Duration, bool) {
	if e.n == 0 {
		return 0, false
	}
	return time.Duration(math.Round(e.mean)), true
}
