package gradcode

import (
	"errors"
	"math"
	"testing"
)

// End to end: every worker encodes its partial gradients, the stragglers'
// payloads are lost, and Combine with the decode vector recovers the sum.
func TestEncodeCombineRecoversGradientSum(t *testing.T) {
	rng := newRand(21)
	const dim = 1000 // spans several encode blocks
	for _, cfg := range []Config{
		{Scheme: Cyclic, N: 7, S: 2},
		{Scheme: Hetero, N: 9, S: 2, Throughputs: []float64{1, 1, 2, 2, 3, 3, 4, 4, 5}},
		{Scheme: Group, N: 9, S: 3, Throughputs: []float64{1, 1, 2, 2, 3, 3, 4, 4, 5}},
	} {
		p, err := NewPlan(cfg)
		if err != nil {
			t.Fatal(err)
		}
		grads := make([][]float32, p.K)
		truth := make([]float64, dim)
		for j := range grads {
			grads[j] = make([]float32, dim)
			for e := range grads[j] {
				grads[j][e] = float32(rng.NormFloat64())
				truth[e] += float64(grads[j][e])
			}
		}
		payloads := make([][]float32, p.N)
		for i := range payloads {
			mine := make([][]float32, p.Load(i))
			for t, part := range p.Assignment[i] {
				mine[t] = grads[part]
			}
			payloads[i] = make([]float32, dim)
			if err := Encode(p, i, mine, payloads[i]); err != nil {
				t.Fatal(err)
			}
		}
		stragglers := rng.Perm(p.N)[:p.S]
		for _, r := range stragglers {
			payloads[r] = nil // lost
		}
		a, err := p.Decode(complement(p.N, stragglers))
		if err != nil {
			t.Fatal(err)
		}
		out := make([]float64, dim)
		if err := Combine(a, payloads, out); err != nil {
			t.Fatal(err)
		}
		num, den := 0.0, 0.0
		for e := range out {
			num += (out[e] - truth[e]) * (out[e] - truth[e])
			den += truth[e] * truth[e]
		}
		if rel := math.Sqrt(num / den); rel > p.Quality.Target {
			t.Fatalf("%s: relative error %.3g > target %.0e", cfg.Scheme, rel, p.Quality.Target)
		}
	}
}

// The blocked float64-accumulating encoder equals the naive double loop, for
// float32 and float64 payloads.
func TestEncodeMatchesNaive(t *testing.T) {
	rng := newRand(5)
	p, err := NewPlan(Config{Scheme: Hetero, N: 6, S: 2, Throughputs: []float64{1, 1, 2, 2, 4, 4}})
	if err != nil {
		t.Fatal(err)
	}
	const dim = 777
	for w := 0; w < p.N; w++ {
		grads := make([][]float32, p.Load(w))
		for t := range grads {
			grads[t] = make([]float32, dim)
			for e := range grads[t] {
				grads[t][e] = float32(rng.NormFloat64())
			}
		}
		out32 := make([]float32, dim)
		out64 := make([]float64, dim)
		if err := Encode(p, w, grads, out32); err != nil {
			t.Fatal(err)
		}
		if err := Encode(p, w, grads, out64); err != nil {
			t.Fatal(err)
		}
		for e := 0; e < dim; e++ {
			want := 0.0
			for t, part := range p.Assignment[w] {
				want += p.B[w][part] * float64(grads[t][e])
			}
			if math.Abs(out64[e]-want) > 1e-12*math.Max(1, math.Abs(want)) {
				t.Fatalf("worker %d element %d: float64 payload %v, want %v", w, e, out64[e], want)
			}
			if out32[e] != float32(want) {
				t.Fatalf("worker %d element %d: float32 payload %v, want %v rounded once", w, e, out32[e], float32(want))
			}
		}
	}
}

// Encode and Combine do not allocate.
func TestEncodeCombineAllocationFree(t *testing.T) {
	p, err := NewPlan(Config{Scheme: Cyclic, N: 5, S: 1})
	if err != nil {
		t.Fatal(err)
	}
	grads := [][]float32{make([]float32, 4096), make([]float32, 4096)}
	out := make([]float32, 4096)
	if n := testing.AllocsPerRun(20, func() { _ = Encode(p, 3, grads, out) }); n != 0 {
		t.Fatalf("Encode allocates %v times per call", n)
	}
	payloads := [][]float32{out, out, nil, out, out}
	dec := []float64{1, 1, 0, 1, 1}
	sum := make([]float64, 4096)
	if n := testing.AllocsPerRun(20, func() { _ = Combine(dec, payloads, sum) }); n != 0 {
		t.Fatalf("Combine allocates %v times per call", n)
	}
}

// Wrong shapes are typed errors, not panics.
func TestEncodeCombineShapeErrors(t *testing.T) {
	p, err := NewPlan(Config{Scheme: Cyclic, N: 5, S: 1})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, 3)
	if err := Encode(p, 0, [][]float32{make([]float32, 3)}, out); !errors.Is(err, ErrShape) {
		t.Fatalf("one gradient for two partitions: got %v", err)
	}
	if err := Encode(p, 0, [][]float32{make([]float32, 3), make([]float32, 2)}, out); !errors.Is(err, ErrShape) {
		t.Fatalf("short gradient: got %v", err)
	}
	if err := Encode(p, 9, [][]float32(nil), out); !errors.Is(err, ErrBadRanks) {
		t.Fatalf("worker 9 of 5: got %v", err)
	}
	if err := Combine([]float64{1, 0}, [][]float32{nil}, make([]float64, 3)); !errors.Is(err, ErrShape) {
		t.Fatalf("payload count: got %v", err)
	}
	if err := Combine([]float64{1}, [][]float32{nil}, make([]float64, 3)); !errors.Is(err, ErrShape) {
		t.Fatalf("missing payload with non-zero coefficient: got %v", err)
	}
}

// BenchmarkEncode times encoding 1 Mi float32 elements from 3 partitions.
func BenchmarkEncode(b *testing.B) {
	p, err := NewPlan(Config{Scheme: Cyclic, N: 8, S: 2})
	if err != nil {
		b.Fatal(err)
	}
	grads := [][]float32{make([]float32, 1<<20), make([]float32, 1<<20), make([]float32, 1<<20)}
	out := make([]float32, 1<<20)
	b.SetBytes(3 << 22)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := Encode(p, 1, grads, out); err != nil {
			b.Fatal(err)
		}
	}
}
