package straggler

import (
	"errors"
	"math"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/internal/cost"
)

// codedNet is a 10 Gb/s network with 20 µs messages.
var codedNet = cost.Net{Alpha: 20 * time.Microsecond, BytesPerSec: 1.25e9}

// pattern fills steps×n slowdowns with f(step, rank).
func pattern(steps, n int, f func(t, r int) float64) [][]float64 {
	out := make([][]float64, steps)
	for t := range out {
		out[t] = make([]float64, n)
		for r := range out[t] {
			out[t][r] = f(t, r)
		}
	}
	return out
}

// powerLaw draws FlexRR's power-law slowdowns, p(x) ∝ x^−α for x ≥ 1
// (straggler/inject's powerlaw=α), seeded.
func powerLaw(steps, n int, alpha float64, seed int64) [][]float64 {
	rng := rand.New(rand.NewSource(seed))
	return pattern(steps, n, func(int, int) float64 { return math.Pow(1-rng.Float64(), -1/(alpha-1)) })
}

func chooseCoded(t *testing.T, in CodedInput) CodedChoice {
	t.Helper()
	if in.Compute == 0 {
		in.Compute = 100 * time.Millisecond
	}
	if in.GradBytes == 0 {
		in.GradBytes = 4 << 20
	}
	if in.Net.BytesPerSec == 0 {
		in.Net = codedNet
	}
	c, err := ChooseCoded(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range c.Costs {
		t.Logf("%-6s s=%d  compute %v  comm %v  total %v", m.Mode, m.S, m.Compute, m.Comm, m.Time)
	}
	return c
}

func TestCodedScenarios(t *testing.T) {
	const n, exact = 4, "ring or shares"
	for _, tc := range []struct {
		name    string
		factors [][]float64
		maxS    int
		grad    int
		want    string
		wantS   int
	}{
		// Nobody late: coding's (s+1)× compute buys nothing; shares
		// ties the ring, and ties go to the ring.
		{name: "no straggler", factors: pattern(50, n, func(int, int) float64 { return 1 }), want: CodedRing},
		// One rank always 3× slow: predictable, so shares give it less
		// and every rank arrives together; coding would double that.
		{name: "steady slow rank", factors: pattern(50, n, func(_, r int) float64 { return map[bool]float64{true: 3, false: 1}[r == 3] }),
			want: CodedShares},
		// FlexRR's power law α = 4 (inject's powerlaw=4): the latest of 4
		// is ~2.2× on average, the second latest ~1.5×: twice the compute
		// at 1.5× does not beat 2.2×. Coding refused (ring and shares
		// within noise of each other: either exact mode).
		{name: "power law 4", factors: powerLaw(2000, n, 4, 1), want: exact},
		// α = 2.5: the latest ~6.9×, the second ~2.3×: 2 × 2.3 < 6.9.
		{name: "power law 2.5", factors: powerLaw(2000, n, 2.5, 1), want: CodedCoded, wantS: 1},
		// A different rank 6× slow every step: unpredictable, so shares
		// cannot help, and coding with s = 1 waits only for the others.
		{name: "random rank 6x", factors: pattern(60, n, func(t, r int) float64 { return map[bool]float64{true: 6, false: 1}[r == t%n] }),
			want: CodedCoded, wantS: 1},
		// The same, but with a 400 MB gradient: the leader's fold of
		// three payloads and three sums costs far more than the wait
		// it saves. Coding refused by the network's price.
		{name: "random rank 6x, huge gradient", grad: 400 << 20,
			factors: pattern(60, n, func(t, r int) float64 { return map[bool]float64{true: 6, false: 1}[r == t%n] }), want: CodedRing},
		// A rank stops outright in one step of the window: every exact
		// mode waits forever; coding with s = 1 goes on.
		{name: "a rank stops", factors: pattern(20, n, func(t, r int) float64 {
			if t == 7 && r == 2 {
				return math.Inf(1)
			}
			return 1
		}), want: CodedCoded, wantS: 1},
		// Two ranks late at once, every step, with s up to 2: s = 2's
		// 3× compute against waiting 8×.
		{name: "two random ranks 8x", maxS: 2, factors: pattern(60, 6, func(t, r int) float64 {
			return map[bool]float64{true: 8, false: 1}[r == t%6 || r == (t+3)%6]
		}), want: CodedCoded, wantS: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := chooseCoded(t, CodedInput{Factors: tc.factors, MaxS: tc.maxS, GradBytes: tc.grad})
			if tc.want == exact && c.Mode != CodedCoded {
				return
			}
			if c.Mode != tc.want || c.S != tc.wantS {
				t.Fatalf("picked %s s=%d, want %s s=%d", c.Mode, c.S, tc.want, tc.wantS)
			}
		})
	}
}

// The prices themselves, on a pattern whose order statistics are known:
// every step rank t%4 is 5× slow. The ring and shares wait 5 computes
// (every rank's mean is 2, so shares stay equal); coding with s = 1 holds
// twice the data and waits for the second latest, 1×: 2 computes.
func TestCodedPricesOnAKnownPattern(t *testing.T) {
	const n = 4
	net := cost.Net{Alpha: time.Millisecond, BytesPerSec: 1e6}
	c := chooseCoded(t, CodedInput{Net: net, GradBytes: 4000, PayloadBytes: 4000, ResultBytes: 8000,
		Factors: pattern(40, n, func(t, r int) float64 { return map[bool]float64{true: 5, false: 1}[r == t%n] })})
	ms := time.Millisecond
	ring := net.Ring(allRanks(n), 4000) // 6 messages of 1000 bytes: 6 × 2 ms
	fold := 2*(ms+4*ms) + 3*(ms+8*ms)   // 2 payloads in, 3 sums out
	want := []CodedCost{
		{Mode: CodedRing, Compute: 500 * ms, Comm: ring, Time: 500*ms + ring},
		{Mode: CodedShares, Compute: 500 * ms, Comm: ring, Time: 500*ms + ring},
		{Mode: CodedCoded, S: 1, Compute: 200 * ms, Comm: fold, Time: 200*ms + fold},
	}
	if ring != 12*ms {
		t.Fatalf("ring priced %v, want 12ms", ring)
	}
	for i, w := range want {
		got := c.Costs[i]
		if got.Mode != w.Mode || got.S != w.S || absDur(got.Compute-w.Compute) > time.Microsecond ||
			got.Comm != w.Comm || absDur(got.Time-w.Time) > time.Microsecond {
			t.Errorf("cost %d = %+v, want %+v", i, got, w)
		}
	}
	if c.Mode != CodedCoded {
		t.Errorf("picked %s", c.Mode)
	}
}

func absDur(d time.Duration) time.Duration { return max(d, -d) }

// Heterogeneous speeds: the coded loads follow the mean speeds, each capped
// at the whole data set (a rank holds a partition at most once).
func TestWaterFillCapsAtTheWholeDataSet(t *testing.T) {
	for _, tc := range []struct {
		speed  []float64
		copies int
		want   []float64
	}{
		{[]float64{1, 1, 1, 1}, 2, []float64{0.5, 0.5, 0.5, 0.5}},
		{[]float64{1, 1, 2, 4}, 1, []float64{0.125, 0.125, 0.25, 0.5}},
		{[]float64{1, 1, 1, 9}, 2, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3, 1}},
		{[]float64{1, 0, 1, 1}, 3, []float64{1, 0, 1, 1}},
		{[]float64{1, 0, 0, 1}, 3, nil},
	} {
		got := waterFill(tc.speed, tc.copies)
		if (got == nil) != (tc.want == nil) {
			t.Fatalf("waterFill(%v, %d) = %v, want %v", tc.speed, tc.copies, got, tc.want)
		}
		for r := range tc.want {
			if math.Abs(got[r]-tc.want[r]) > 1e-12 {
				t.Fatalf("waterFill(%v, %d) = %v, want %v", tc.speed, tc.copies, got, tc.want)
			}
		}
	}
}

func TestChooseCodedRejectsBadInput(t *testing.T) {
	ok := pattern(3, 4, func(int, int) float64 { return 1 })
	for name, in := range map[string]CodedInput{
		"no steps":       {Compute: time.Second},
		"no compute":     {Factors: ok},
		"ragged":         {Factors: [][]float64{{1, 1, 1}, {1, 1}}, Compute: time.Second},
		"zero slowdown":  {Factors: [][]float64{{1, 0, 1}}, Compute: time.Second},
		"NaN slowdown":   {Factors: [][]float64{{1, math.NaN(), 1}}, Compute: time.Second},
		"s of all ranks": {Factors: ok, Compute: time.Second, MaxS: 4},
		"margin of 1":    {Factors: ok, Compute: time.Second, Margin: 1},
	} {
		if _, err := ChooseCoded(in); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig", name, err)
		}
	}
}

// More stopped ranks in a step than any s tolerates: every mode waits
// forever, and the pick is the ring (nothing beats it).
func TestTooManyStoppedRanksPriceEveryModeForever(t *testing.T) {
	c := chooseCoded(t, CodedInput{Factors: [][]float64{{1, math.Inf(1), math.Inf(1), 1}}})
	for _, m := range c.Costs {
		if m.Time != Forever {
			t.Errorf("%s s=%d priced %v", m.Mode, m.S, m.Time)
		}
	}
	if c.Mode != CodedRing {
		t.Errorf("picked %s", c.Mode)
	}
}

// latest is the sort's answer, on random arrivals with ties and +Inf.
func TestLatestIsTheSortedAnswer(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for range 500 {
		n := 1 + rng.Intn(40)
		a := make([]float64, n)
		for i := range a {
			a[i] = float64(rng.Intn(10))
			if rng.Intn(15) == 0 {
				a[i] = math.Inf(1)
			}
		}
		s := rng.Intn(n)
		sorted := slices.Clone(a)
		slices.Sort(sorted)
		if got, want := latest(a, s, nil), sorted[n-1-s]; got != want {
			t.Fatalf("latest(%v, %d) = %v, want %v", a, s, got, want)
		}
	}
}
