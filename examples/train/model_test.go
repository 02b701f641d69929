package train

import (
	"math"
	"testing"
)

// refLoss is a naive float64 implementation of the forward pass and the
// summed cross-entropy, independent of the model's code: the reference the
// finite differences are taken on, precise enough for a small step.
func refLoss(sizes []int, p []float64, d *Dataset, rows []int) float64 {
	total := 0.0
	for _, r := range rows {
		a := make([]float64, d.Features)
		for i, v := range d.Row(r) {
			a[i] = float64(v)
		}
		off := 0
		for l := 0; l+1 < len(sizes); l++ {
			in, out := sizes[l], sizes[l+1]
			next := make([]float64, out)
			for o := range out {
				s := p[off+in*out+o]
				for i := range in {
					s += p[off+o*in+i] * a[i]
				}
				if l+2 < len(sizes) {
					s = math.Max(s, 0)
				}
				next[o] = s
			}
			off += in*out + out
			a = next
		}
		sum := 0.0
		for _, v := range a {
			sum += math.Exp(v)
		}
		total += math.Log(sum) - a[d.Y[r]]
	}
	return total
}

// TestGradientMatchesFiniteDifferences checks every parameter's analytic
// gradient against a central difference, for softmax regression, one and
// two hidden layers.
func TestGradientMatchesFiniteDifferences(t *testing.T) {
	d := loadDigits(t)
	rows := []int{0, 17, 300, 1200}
	for _, sizes := range [][]int{{64, 10}, {64, 16, 10}, {64, 12, 8, 10}} {
		m, err := NewMLP(sizes, 3)
		if err != nil {
			t.Fatal(err)
		}
		for i := range m.Params { // non-zero biases, so they are checked too
			if m.Params[i] == 0 {
				m.Params[i] = 0.05 * float32(i%7-3)
			}
		}
		grad := make([]float32, m.NumParams())
		loss := m.AccumulateGradient(d, rows, grad)
		p := make([]float64, m.NumParams())
		for i, v := range m.Params {
			p[i] = float64(v)
		}
		if ref := refLoss(sizes, p, d, rows); math.Abs(loss-ref) > 1e-4*math.Abs(ref) {
			t.Fatalf("%v: loss %v, reference %v", sizes, loss, ref)
		}
		const eps = 1e-5
		bad := 0
		for i := range p {
			orig := p[i]
			p[i] = orig + eps
			up := refLoss(sizes, p, d, rows)
			p[i] = orig - eps
			down := refLoss(sizes, p, d, rows)
			p[i] = orig
			num := (up - down) / (2 * eps)
			if diff := math.Abs(num - float64(grad[i])); diff > 1e-4+1e-3*math.Abs(num) {
				bad++
				if bad <= 5 {
					t.Errorf("%v: param %d: analytic %v, numeric %v", sizes, i, grad[i], num)
				}
			}
		}
		if bad > 0 {
			t.Fatalf("%v: %d of %d gradients disagree", sizes, bad, m.NumParams())
		}
	}
}

func TestNewMLPIsSeeded(t *testing.T) {
	a, _ := NewMLP([]int{64, 8, 10}, 1)
	b, _ := NewMLP([]int{64, 8, 10}, 1)
	c, _ := NewMLP([]int{64, 8, 10}, 2)
	if paramsHash(a.Params) != paramsHash(b.Params) || paramsHash(a.Params) == paramsHash(c.Params) {
		t.Fatal("initial weights do not follow the seed")
	}
	if want := 64*8 + 8 + 8*10 + 10; a.NumParams() != want {
		t.Fatalf("%d params, want %d", a.NumParams(), want)
	}
	for _, bad := range [][]int{{64}, {64, 0, 10}, {64, 1}} {
		if _, err := NewMLP(bad, 1); err == nil {
			t.Errorf("sizes %v accepted", bad)
		}
	}
}

func TestParseHidden(t *testing.T) {
	for in, want := range map[string][]int{"": nil, "0": nil, "64": {64}, "128, 32": {128, 32}} {
		got, err := ParseHidden(in)
		if err != nil || len(got) != len(want) {
			t.Fatalf("%q: %v, %v", in, got, err)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%q: %v", in, got)
			}
		}
	}
	for _, bad := range []string{"x", "64,0", "-1"} {
		if _, err := ParseHidden(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
