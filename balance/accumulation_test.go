package balance

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// AntDT §VI-B on cluster B: V100s 3× the P100s, B = 768, both GPUs limited
// to B̂_max = 121 (15 GiB free at 120 MiB/sample, 95% rule), C ≤ 5. Eq. 3
// alone must cap the V100s at 121 (step 0.71 s); with accumulation the
// V100s run two micro-batches of 72 and the P100s one of 48, all finishing
// at 0.48 s = 768/(4·300 + 4·100).
func TestAntDTEq4_V100P100WithAccumulation(t *testing.T) {
	bmax, err := MaxBatchFromMemory(15<<30, 120<<20)
	if err != nil {
		t.Fatal(err)
	}
	if bmax != 121 {
		t.Fatalf("B̂_max = %d, want ⌊0.95·15360/120⌋ = 121", bmax)
	}
	classes := []DeviceClass{
		{Name: "V100", Count: 4, Speed: 300, MinBatch: 32, MaxBatch: bmax},
		{Name: "P100", Count: 4, Speed: 100, MinBatch: 16, MaxBatch: bmax},
	}
	plan, err := AdjustBSAccum(AccumConfig{GlobalBatch: 768, MinAccum: 1, MaxAccum: 5}, classes)
	if err != nil {
		t.Fatal(err)
	}
	v, p := plan.Classes[0], plan.Classes[1]
	if v.Accum != 2 || v.Batch != 72 || p.Accum != 1 || p.Batch != 48 {
		t.Fatalf("plan = %+v, want V100 2×72 and P100 1×48", plan.Classes)
	}
	if math.Abs(plan.StepS-0.48) > 1e-12 {
		t.Fatalf("step %v s, want 0.48", plan.StepS)
	}
}

// bruteAccum enumerates every (C_i, B_i) combination.
func bruteAccum(cfg AccumConfig, classes []DeviceClass) (float64, bool) {
	best, found := math.Inf(1), false
	var rec func(i, left int, z float64)
	rec = func(i, left int, z float64) {
		if i == len(classes) {
			if left == 0 && z < best {
				best, found = z, true
			}
			return
		}
		c := classes[i]
		for C := cfg.MinAccum; C <= cfg.MaxAccum; C++ {
			for B := c.MinBatch; B <= c.MaxBatch; B++ {
				if w := c.Count * C * B; w <= left {
					rec(i+1, left-w, math.Max(z, BatchTime(C*B, c.Speed)))
				}
			}
		}
	}
	rec(0, cfg.GlobalBatch, 0)
	return best, found
}

func TestAdjustBSAccum_MatchesBruteForceOnSmallInstances(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 5))
	feasible := 0
	for trial := range 2000 {
		k := 1 + rng.IntN(3)
		classes := make([]DeviceClass, k)
		for i := range classes {
			lo := rng.IntN(4)
			classes[i] = DeviceClass{
				Name: string(rune('a' + i)), Count: 1 + rng.IntN(3),
				Speed:    []float64{1, 2, 3, 0.7, 5}[rng.IntN(5)],
				MinBatch: lo, MaxBatch: max(1, lo+rng.IntN(6)),
			}
		}
		cfg := AccumConfig{GlobalBatch: 1 + rng.IntN(40), MinAccum: 1 + rng.IntN(2)}
		cfg.MaxAccum = cfg.MinAccum + rng.IntN(4)
		want, ok := bruteAccum(cfg, classes)
		plan, err := AdjustBSAccum(cfg, classes)
		if !ok {
			if !errors.Is(err, ErrInfeasible) {
				t.Fatalf("trial %d: brute force infeasible, got plan %+v err %v", trial, plan, err)
			}
			continue
		}
		feasible++
		if err != nil {
			t.Fatalf("trial %d: %+v %+v: %v", trial, cfg, classes, err)
		}
		sum := 0
		for i, cp := range plan.Classes {
			c := classes[i]
			if cp.Batch < c.MinBatch || cp.Batch > c.MaxBatch || cp.Accum < cfg.MinAccum || cp.Accum > cfg.MaxAccum {
				t.Fatalf("trial %d: class %d plan %+v violates bounds", trial, i, cp)
			}
			sum += c.Count * cp.Accum * cp.Batch
		}
		if sum != cfg.GlobalBatch {
			t.Fatalf("trial %d: Σ n·C·B = %d, want %d", trial, sum, cfg.GlobalBatch)
		}
		if plan.StepS != want {
			t.Fatalf("trial %d: %+v %+v: step %v, brute force %v (%+v)", trial, cfg, classes, plan.StepS, want, plan.Classes)
		}
	}
	if feasible < 500 {
		t.Fatalf("only %d feasible instances; the generator no longer exercises the solver", feasible)
	}
}

// Two classes of 4 devices can only make global batches that are multiples
// of 4: 770 has no exact solution and the error must say what is reachable.
func TestAdjustBSAccum_InfeasibleGlobalBatchIsExplained(t *testing.T) {
	classes := []DeviceClass{
		{Name: "V100", Count: 4, Speed: 300, MinBatch: 32, MaxBatch: 121},
		{Name: "P100", Count: 4, Speed: 100, MinBatch: 16, MaxBatch: 121},
	}
	_, err := AdjustBSAccum(AccumConfig{GlobalBatch: 770, MinAccum: 1, MaxAccum: 5}, classes)
	if !errors.Is(err, ErrInfeasible) {
		t.Fatalf("err = %v, want ErrInfeasible", err)
	}
	if !strings.Contains(err.Error(), "below: 768") {
		t.Fatalf("error %q should name 768 as the nearest reachable batch", err)
	}
	if _, err := AdjustBSAccum(AccumConfig{GlobalBatch: 768, MinAccum: 0, MaxAccum: 5}, classes); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("MinAccum 0: err = %v, want ErrInvalidInput", err)
	}
}

func TestMaxBatchFromMemory(t *testing.T) {
	cases := []struct {
		free, per int64
		want      int
	}{
		{100, 1, 95},
		{20, 1, 19},
		{16 << 30, 1 << 20, 15564},  // ⌊0.95·16384⌋
		{1 << 62, 1 << 40, 3984588}, // no overflow: ⌊0.95·2²²⌋
	}
	for _, c := range cases {
		got, err := MaxBatchFromMemory(c.free, c.per)
		if err != nil || got != c.want {
			t.Errorf("MaxBatchFromMemory(%d, %d) = %d, %v; want %d", c.free, c.per, got, err, c.want)
		}
	}
	if _, err := MaxBatchFromMemory(10, 11); !errors.Is(err, ErrInfeasible) {
		t.Errorf("nothing fits: err = %v, want ErrInfeasible", err)
	}
	if _, err := MaxBatchFromMemory(10, 0); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("zero bytes per sample: err = %v, want ErrInvalidInput", err)
	}
}

func TestOrProgressionMatchesNaiveShifts(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 9))
	for trial := range 500 {
		limit := rng.IntN(300)
		src := newSumSet(limit)
		for range 1 + rng.IntN(5) {
			src.set(rng.IntN(limit + 1))
		}
		base, stride, count := rng.IntN(limit+2), 1+rng.IntN(40), rng.IntN(20)
		got := newSumSet(limit)
		orProgression(got, src, base, stride, count, newSumSet(limit))
		for x := 0; x <= limit; x++ {
			want := false
			for k := range count {
				if src.has(x - base - k*stride) {
					want = true
				}
			}
			if got.has(x) != want {
				t.Fatalf("trial %d: bit %d = %v, want %v (limit %d base %d stride %d count %d)", trial, x, got.has(x), want, limit, base, stride, count)
			}
		}
	}
}

// 1000 ranks in four device classes.
func BenchmarkAdjustBSAccum1000Ranks(b *testing.B) {
	classes := []DeviceClass{
		{Name: "H100", Count: 250, Speed: 900, MinBatch: 32, MaxBatch: 128},
		{Name: "A100", Count: 250, Speed: 600, MinBatch: 32, MaxBatch: 128},
		{Name: "V100", Count: 250, Speed: 300, MinBatch: 16, MaxBatch: 96},
		{Name: "P100", Count: 250, Speed: 100, MinBatch: 16, MaxBatch: 96},
	}
	cfg := AccumConfig{GlobalBatch: 64000, MinAccum: 1, MaxAccum: 5}
	for b.Loop() {
		if _, err := AdjustBSAccum(cfg, classes); err != nil {
			b.Fatal(err)
		}
	}
}
