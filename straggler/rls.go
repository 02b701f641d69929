package straggler

import (
	"fmt"
	"math"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// NumFeatures is the length of the feature vector RLS regresses on.
const NumFeatures = 6

// Features writes the regression features of o into dst (len ≥
// NumFeatures) and returns dst[:NumFeatures]:
//
//	[1, arrival (s), CPU, Net, GPU util, SM clock (GHz)]
//
// GPU features are 0 when the reading is not valid. The arrival is the
// autoregressive term; CPU and network are STAR's resource series (§IV-A),
// taken as their own forecast for the next step (a persistence forecast in
// place of STAR's LSTM).
func Features(o Observation, dst []float64) []float64 {
	dst = dst[:NumFeatures]
	dst[0] = 1
	dst[1] = o.Arrival.Seconds()
	dst[2] = o.CPU
	dst[3] = o.Net
	dst[4], dst[5] = 0, 0
	if o.GPU.Valid {
		dst[4] = o.GPU.Util
		dst[5] = o.GPU.SMClockMHz / 1000
	}
	return dst
}

// RLS predicts the next arrival by recursive least squares with exponential
// forgetting over the Features of the previous observation: it fits
// a(s+1) ≈ θ·x(s) online, one rank per instance. Until it has seen
// 2·NumFeatures pairs, or whenever the regression gives a non-finite or
// negative value, it falls back to an EWMA of arrivals.
//
// Directions of feature space that never vary (a GPU-less rank's GPU
// features) would make the inverse-covariance P grow as λ^−n; P is clipped
// by the congruence P ← D·P·D with D_ii = min(1, √(maxP/P_ii)), which keeps
// it positive semi-definite.
type RLS struct {
	forget   float64
	theta    []float64
	p        blas64.Symmetric
	prev     []float64 // features of the last observation
	px       []float64 // workspace
	have     bool
	n        int
	fallback EWMA
}

var _ Predictor = (*RLS)(nil)

const (
	rlsInitP = 100.0 // P₀ = rlsInitP·I, a weak prior θ ≈ 0
	rlsMaxP  = 1e4
)

// NewRLS returns an RLS predictor with forgetting factor forget in (0, 1]
// (memory ≈ 1/(1−forget) steps) and fallback EWMA smoothing alpha.
func NewRLS(forget, alpha float64) (*RLS, error) {
	if !(forget > 0 && forget <= 1) {
		return nil, fmt.Errorf("rls: forgetting factor %v not in (0,1]: %w", forget, ErrInvalidConfig)
	}
	fb, err := NewEWMA(alpha)
	if err != nil {
		return nil, fmt.Errorf("rls: %w", err)
	}
	r := &RLS{
		forget:   forget,
		theta:    make([]float64, NumFeatures),
		p:        blas64.Symmetric{Uplo: blas.Upper, N: NumFeatures, Stride: NumFeatures, Data: make([]float64, NumFeatures*NumFeatures)},
		prev:     make([]float64, NumFeatures),
		px:       make([]float64, NumFeatures),
		fallback: *fb,
	}
	for i := 0; i < NumFeatures; i++ {
		r.p.Data[i*NumFeatures+i] = rlsInitP
	}
	return r, nil
}

// Observe implements Predictor: it fits the pair (previous features, this
// arrival), then keeps this observation's features for the next forecast.
func (r *RLS) Observe(o Observation) {
	r.fallback.Observe(o)
	if r.have {
		r.update(r.prev, o.Arrival.Seconds())
	}
	Features(o, r.prev)
	r.have = true
}

// update performs one RLS step with features x and target y.
func (r *RLS) update(x []float64, y float64) {
	vx := blas64.Vector{N: NumFeatures, Inc: 1, Data: x}
	vpx := blas64.Vector{N: NumFeatures, Inc: 1, Data: r.px}
	blas64.Symv(1, r.p, vx, 0, vpx) // px = P·x
	denom := r.forget + blas64.Dot(vx, vpx)
	if !(denom > 0) || math.IsInf(denom, 0) {
		return
	}
	err := y - blas64.Dot(vx, blas64.Vector{N: NumFeatures, Inc: 1, Data: r.theta})
	// θ += P·x·e/denom
	blas64.Axpy(err/denom, vpx, blas64.Vector{N: NumFeatures, Inc: 1, Data: r.theta})
	// P = (P − px·pxᵀ/denom)/λ, upper triangle.
	blas64.Syr(-1/denom, vpx, r.p)
	for i := 0; i < NumFeatures; i++ {
		for j := i; j < NumFeatures; j++ {
			r.p.Data[i*NumFeatures+j] /= r.forget
		}
	}
	r.clip()
	r.n++
}

// clip bounds P's diagonal by rlsMaxP with a diagonal congruence.
func (r *RLS) clip() {
	var d [NumFeatures]float64
	scale := false
	for i := range d {
		d[i] = 1
		if pii := r.p.Data[i*NumFeatures+i]; pii > rlsMaxP {
			d[i] = math.Sqrt(rlsMaxP / pii)
			scale = true
		}
	}
	if !scale {
		return
	}
	for i := 0; i < NumFeatures; i++ {
		for j := i; j < NumFeatures; j++ {
			r.p.Data[i*NumFeatures+j] *= d[i] * d[j]
		}
	}
}

// Predict implements Predictor.
func (r *RLS) Predict() (time.Duration, bool) {
	fb, ok := r.fallback.Predict()
	if !ok || r.n < 2*NumFeatures {
		return fb, ok
	}
	y := blas64.Dot(blas64.Vector{N: NumFeatures, Inc: 1, Data: r.prev}, blas64.Vector{N: NumFeatures, Inc: 1, Data: r.theta})
	if !(y >= 0) || y > math.MaxInt64/1e9 {
		return fb, true
	}
	return time.Duration(math.Round(y * 1e9)), true
}

// Coefficients returns a copy of θ, in Features order.
func (r *RLS) Coefficients() []float64 { return append([]float64(nil), r.theta...) }
