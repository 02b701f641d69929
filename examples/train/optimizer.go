package train

import "fmt"

// SGD is stochastic gradient descent with optional (heavy-ball) momentum:
//
//	v ← μ·v + g;  p ← p − η·v
//
// Given identical gradients it makes identical updates on every rank, so
// data-parallel replicas stay bit-identical.
type SGD struct {
	// LR is the learning rate η.
	LR float32
	// Momentum is μ in [0, 1); 0 is plain SGD.
	Momentum float32

	velocity []float32
}

// NewSGD returns an optimizer for n parameters.
func NewSGD(n int, lr, momentum float64) (*SGD, error) {
	if !(lr > 0) {
		return nil, fmt.Errorf("train: learning rate %v must be positive", lr)
	}
	if !(momentum >= 0 && momentum < 1) {
		return nil, fmt.Errorf("train: momentum %v must be in [0, 1)", momentum)
	}
	return &SGD{LR: float32(lr), Momentum: float32(momentum), velocity: make([]float32, n)}, nil
}

// Step applies grad (the mean gradient) to params.
func (o *SGD) Step(params, grad []float32) {
	v := o.velocity[:len(params)]
	for i, g := range grad[:len(params)] {
		v[i] = o.Momentum*v[i] + g
		params[i] -= o.LR * v[i]
	}
}

// Reset zeroes the momentum.
func (o *SGD) Reset() { clear(o.velocity) }
