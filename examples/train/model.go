package train

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// MLP is a multilayer perceptron classifier in float32: dense layers with
// ReLU between them and a softmax cross-entropy output. Sizes [64, 10] is
// softmax regression; [64, 64, 10] one hidden layer of 64.
//
// All parameters live in one flat slice, Params, so that a whole model is
// one Broadcast and its gradient one AllReduce. Layer l's weights are an
// out×in row-major matrix followed by its out biases. An MLP keeps scratch
// buffers: it is not safe for concurrent use.
type MLP struct {
	// Sizes are the layer widths, input first, classes last.
	Sizes []int
	// Params are every weight and bias, layer by layer.
	Params []float32

	layers []dense
	acts   [][]float32 // acts[l]: input of layer l; acts[len(layers)]: logits
	deltas [][]float32 // deltas[l]: loss gradient w.r.t. acts[l]'s pre-activation
}

// dense is one layer's shape and its offsets in Params.
type dense struct{ in, out, w, b int }

// NewMLP returns a model with the given layer sizes, He-initialised from a
// PCG stream of seed (biases zero), so the same seed gives the same
// weights everywhere.
func NewMLP(sizes []int, seed uint64) (*MLP, error) {
	if len(sizes) < 2 {
		return nil, fmt.Errorf("train: model needs at least an input and an output size, got %v", sizes)
	}
	for _, s := range sizes {
		if s < 1 {
			return nil, fmt.Errorf("train: layer sizes %v must all be ≥ 1", sizes)
		}
	}
	if sizes[len(sizes)-1] < 2 {
		return nil, fmt.Errorf("train: a classifier needs at least 2 classes, got %d", sizes[len(sizes)-1])
	}
	m := &MLP{Sizes: append([]int(nil), sizes...)}
	off := 0
	for l := 0; l+1 < len(sizes); l++ {
		in, out := sizes[l], sizes[l+1]
		m.layers = append(m.layers, dense{in: in, out: out, w: off, b: off + in*out})
		off += in*out + out
	}
	m.Params = make([]float32, off)
	m.acts = make([][]float32, len(sizes))
	m.deltas = make([][]float32, len(sizes))
	for l, s := range sizes {
		m.acts[l] = make([]float32, s)
		m.deltas[l] = make([]float32, s)
	}
	rng := rand.New(rand.NewPCG(seed, streamInit))
	for l, ly := range m.layers {
		gain := 2.0 // He, for a ReLU that follows
		if l == len(m.layers)-1 {
			gain = 1
		}
		std := math.Sqrt(gain / float64(ly.in))
		for i := range ly.in * ly.out {
			m.Params[ly.w+i] = float32(rng.NormFloat64() * std)
		}
	}
	return m, nil
}

// NumParams returns len(m.Params).
func (m *MLP) NumParams() int { return len(m.Params) }

// Classes returns the number of output classes.
func (m *MLP) Classes() int { return m.Sizes[len(m.Sizes)-1] }

// forward runs x through the network and returns the logits (a scratch
// buffer, valid until the next call).
func (m *MLP) forward(x []float32) []float32 {
	copy(m.acts[0], x)
	last := len(m.layers) - 1
	for l, ly := range m.layers {
		in, out := m.acts[l], m.acts[l+1]
		for o := range ly.out {
			row := m.Params[ly.w+o*ly.in : ly.w+(o+1)*ly.in]
			s := m.Params[ly.b+o]
			for i, v := range in {
				s += row[i] * v
			}
			if l < last && s < 0 {
				s = 0
			}
			out[o] = s
		}
	}
	return m.acts[len(m.layers)]
}

// logSumExp returns log Σ exp(z), computed stably in float64.
func logSumExp(z []float32) float64 {
	mx := float64(z[0])
	for _, v := range z[1:] {
		mx = max(mx, float64(v))
	}
	s := 0.0
	for _, v := range z {
		s += math.Exp(float64(v) - mx)
	}
	return mx + math.Log(s)
}

// AccumulateGradient adds, for each row of d listed in rows, the gradient
// of that row's cross-entropy loss to grad (len NumParams), and returns the
// sum of the rows' losses. It does not average: the caller divides by the
// number of rows it wants to average over, which lets data-parallel ranks
// with unequal shards sum their partial gradients exactly.
func (m *MLP) AccumulateGradient(d *Dataset, rows []int, grad []float32) float64 {
	loss := 0.0
	L := len(m.layers)
	for _, r := range rows {
		z := m.forward(d.Row(r))
		lse := logSumExp(z)
		y := int(d.Y[r])
		loss += lse - float64(z[y])
		top := m.deltas[L]
		for k, v := range z {
			top[k] = float32(math.Exp(float64(v) - lse))
		}
		top[y]--
		for l := L - 1; l >= 0; l-- {
			ly := m.layers[l]
			in, delta := m.acts[l], m.deltas[l+1]
			for o, dv := range delta {
				if dv == 0 {
					continue
				}
				g := grad[ly.w+o*ly.in : ly.w+(o+1)*ly.in]
				for i, v := range in {
					g[i] += dv * v
				}
				grad[ly.b+o] += dv
			}
			if l == 0 {
				break
			}
			prev := m.deltas[l]
			clear(prev)
			for o, dv := range delta {
				if dv == 0 {
					continue
				}
				row := m.Params[ly.w+o*ly.in : ly.w+(o+1)*ly.in]
				for i, w := range row {
					prev[i] += dv * w
				}
			}
			for i, a := range in { // ReLU: no gradient where it was clamped
				if a <= 0 {
					prev[i] = 0
				}
			}
		}
	}
	return loss
}

// Predict returns the most likely class of x.
func (m *MLP) Predict(x []float32) int {
	return argmax(m.forward(x))
}

// argmax returns the index of the largest element (the first on ties).
func argmax(z []float32) int {
	best := 0
	for k, v := range z {
		if v > z[best] {
			best = k
		}
	}
	return best
}

// Evaluate returns the mean cross-entropy loss and the accuracy (0..1) of
// the model on every row of d.
func (m *MLP) Evaluate(d *Dataset) (loss, accuracy float64) {
	if d.Len() == 0 {
		return 0, 0
	}
	correct := 0
	for r := range d.Len() {
		z := m.forward(d.Row(r))
		loss += logSumExp(z) - float64(z[d.Y[r]])
		if argmax(z) == int(d.Y[r]) {
			correct++
		}
	}
	n := float64(d.Len())
	return loss / n, float64(correct) / n
}

// ParseHidden parses hidden layer widths written as a comma-separated list
// ("64", "128,64"); "" and "0" mean no hidden layer (softmax regression).
func ParseHidden(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("train: hidden layer widths %q: %w", s, err)
		}
		if n < 1 {
			return nil, fmt.Errorf("train: hidden layer width %d in %q must be ≥ 1", n, s)
		}
		out = append(out, n)
	}
	return out, nil
}
