package straggler

import (
	"math/rand/v2"
	"testing"
	"time"
)

// decideInput builds steps of observations for world ranks: 100ms compute
// with 3% noise, 2% of ranks 1.5–3× slow in any step.
func decideInput(world, steps int) [][]Observation {
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([][]Observation, steps)
	for s := range out {
		row := make([]Observation, world)
		for r := range row {
			f := 1 + 0.03*rng.NormFloat64()
			if rng.IntN(50) == 0 {
				f *= 1.5 + 1.5*rng.Float64()
			}
			a := time.Duration(float64(100*time.Millisecond) * f)
			row[r] = Observation{Rank: r, Step: s, Arrival: a, Wait: 20 * time.Millisecond, Bytes: 1 << 20, CPU: min(1, 1/f), Net: 0.4}
		}
		out[s] = row
	}
	return out
}

// BenchmarkDecide1024 measures one step boundary at 1024 ranks: the 1024
// Step calls that complete a step, the predictor updates, classification,
// and the Eq. 3 mode choice. One op is one decision.
func BenchmarkDecide1024(b *testing.B) {
	const world, steps = 1024, 64
	in := decideInput(world, steps)
	c, err := NewController(Config{World: world, GlobalBatch: 32 * world, WaitCandidates: []time.Duration{10 * time.Millisecond, 50 * time.Millisecond}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, o := range in[i%steps] {
			o.Step = i
			if err := c.Step(o); err != nil {
				b.Fatal(err)
			}
		}
		c.Ready()
		c.Advance()
	}
}

// BenchmarkChooseMode1024 measures the Eq. 3 minimisation alone.
func BenchmarkChooseMode1024(b *testing.B) {
	in := decideInput(1024, 1)[0]
	arr := make([]time.Duration, len(in))
	for i, o := range in {
		arr[i] = o.Arrival
	}
	mi := ModeInput{Arrivals: arr, Collective: 20 * time.Millisecond, Phi: 32 * 1024, GlobalBatch: 32 * 1024,
		Threshold: 0.2, MaxEvict: 512, WaitCandidates: []time.Duration{10 * time.Millisecond, 50 * time.Millisecond}}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := ChooseMode(mi); err != nil {
			b.Fatal(err)
		}
	}
}
