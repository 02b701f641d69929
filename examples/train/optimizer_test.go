package train

import (
	"math"
	"testing"
)

func TestSGDMomentumFollowsTheRecurrence(t *testing.T) {
	const lr, mu = 0.1, 0.9
	o, err := NewSGD(2, lr, mu)
	if err != nil {
		t.Fatal(err)
	}
	p := []float32{1, -2}
	ref, vel := []float64{1, -2}, []float64{0, 0}
	grads := [][]float32{{0.5, 1}, {-0.25, 1}, {1, -3}}
	for _, g := range grads {
		o.Step(p, g)
		for i := range ref {
			vel[i] = mu*vel[i] + float64(g[i])
			ref[i] -= lr * vel[i]
		}
	}
	for i := range p {
		if math.Abs(float64(p[i])-ref[i]) > 1e-6 {
			t.Fatalf("param %d = %v, want %v", i, p[i], ref[i])
		}
	}
	o.Reset()
	before := p[0]
	o.Step(p, []float32{0, 0})
	if p[0] != before {
		t.Fatal("Reset kept the momentum")
	}
	for _, bad := range [][2]float64{{0, 0.5}, {-1, 0}, {0.1, 1}, {0.1, -0.1}} {
		if _, err := NewSGD(1, bad[0], bad[1]); err == nil {
			t.Errorf("lr %v momentum %v accepted", bad[0], bad[1])
		}
	}
}
