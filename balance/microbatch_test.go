package balance

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// The NVML mock's mix (nvml.Fake as in cmd/ringtail-train --fake-gpu): two
// P100 (16 GiB, a third of a V100's speed) and two V100 (32 GiB), 2 GiB of
// activations per sample, so B̂max = 7 and 15. A global batch of 64 does
// not fit in one pass (7+7+15+15 = 44); Eq. 3 alone (AdjustBS with the
// caps as maxima) is infeasible, the micro-batch plan runs the V100s 2×12
// and the P100s 2×4, all finishing at 64/(2·3+2·1) = 8 time units.
func TestPlanMicro_V100P100Mock(t *testing.T) {
	p100, err := MaxBatchFromMemory(16<<30, 2<<30)
	if err != nil {
		t.Fatal(err)
	}
	v100, err := MaxBatchFromMemory(32<<30, 2<<30)
	if err != nil {
		t.Fatal(err)
	}
	if p100 != 7 || v100 != 15 {
		t.Fatalf("caps %d, %d; want 7, 15", p100, v100)
	}
	ranks := []MemoryRank{{Speed: 1, MicroCap: p100}, {Speed: 1, MicroCap: p100}, {Speed: 3, MicroCap: v100}, {Speed: 3, MicroCap: v100}}
	if _, err := AdjustBS(64, []RankSpeed{{Speed: 1, MaxBatch: p100}, {Speed: 1, MaxBatch: p100}, {Speed: 3, MaxBatch: v100}, {Speed: 3, MaxBatch: v100}}); !errors.Is(err, ErrInfeasible) {
		t.Fatalf("Eq. 3 under the caps: err %v, want ErrInfeasible", err)
	}
	plan, err := PlanMicro(64, 4, ranks)
	if err != nil {
		t.Fatal(err)
	}
	want := []Micro{{8, 4, 2}, {8, 4, 2}, {24, 12, 2}, {24, 12, 2}}
	for r, m := range plan.Ranks {
		if m != want[r] {
			t.Fatalf("rank %d: %+v, want %+v (plan %+v)", r, m, want[r], plan.Ranks)
		}
	}
	if plan.StepS != 8 {
		t.Fatalf("step %v, want 8", plan.StepS)
	}
	// One pass cannot hold it.
	if _, err := PlanMicro(64, 1, ranks); !errors.Is(err, ErrInfeasible) {
		t.Fatalf("one pass: err %v, want ErrInfeasible", err)
	}
}

// On random instances, no micro-batch exceeds its rank's cap, the
// micro-batches sum to the share and the shares to the global batch, no
// rank runs more than maxAccum passes, and the step time is never longer
// than the exact Eq. 4 solution's with every rank its own class.
func TestPlanMicro_NeverSlowerThanEq4(t *testing.T) {
	rng := rand.New(rand.NewPCG(38, 4))
	solved := 0
	for it := 0; it < 1500; it++ {
		n := 1 + rng.IntN(5)
		maxAccum := 1 + rng.IntN(4)
		ranks := make([]MemoryRank, n)
		classes := make([]DeviceClass, n)
		for r := range ranks {
			ranks[r] = MemoryRank{Speed: float64(1 + rng.IntN(6)), MicroCap: 1 + rng.IntN(12)}
			classes[r] = DeviceClass{Count: 1, Speed: ranks[r].Speed, MaxBatch: ranks[r].MicroCap}
		}
		B := 1 + rng.IntN(60)
		plan, err := PlanMicro(B, maxAccum, ranks)
		eq4, err4 := AdjustBSAccum(AccumConfig{GlobalBatch: B, MinAccum: 1, MaxAccum: maxAccum}, classes)
		if err != nil {
			if !errors.Is(err, ErrInfeasible) {
				t.Fatalf("instance %d: %v", it, err)
			}
			if err4 == nil {
				t.Fatalf("instance %d: micro plan infeasible but Eq. 4 solved it: %+v", it, eq4)
			}
			continue
		}
		solved++
		total := 0
		for r, m := range plan.Ranks {
			sizes, sum := m.Sizes(), 0
			for _, s := range sizes {
				if s > ranks[r].MicroCap || s < 1 {
					t.Fatalf("instance %d rank %d: micro-batch %d outside [1, cap %d] (%+v)", it, r, s, ranks[r].MicroCap, m)
				}
				sum += s
			}
			if sum != m.Share || m.Batch > ranks[r].MicroCap || m.Accum > maxAccum {
				t.Fatalf("instance %d rank %d: %+v sums to %d, cap %d, max accum %d", it, r, m, sum, ranks[r].MicroCap, maxAccum)
			}
			total += m.Share
		}
		if total != B {
			t.Fatalf("instance %d: shares sum to %d, want %d", it, total, B)
		}
		if err4 == nil && plan.StepS > eq4.StepS*(1+1e-12) {
			t.Fatalf("instance %d: micro plan %v s slower than Eq. 4's %v s (%+v vs %+v)", it, plan.StepS, eq4.StepS, plan.Ranks, eq4.Classes)
		}
	}
	if solved < 500 {
		t.Fatalf("only %d of 1500 instances feasible: the test checks too little", solved)
	}
}

func TestSplitShare(t *testing.T) {
	for _, c := range []struct {
		share, limit int
		want         Micro
	}{
		{0, 5, Micro{}},
		{5, 0, Micro{5, 5, 1}},
		{5, 5, Micro{5, 5, 1}},
		{6, 5, Micro{6, 3, 2}},
		{11, 5, Micro{11, 4, 3}},
		{24, 15, Micro{24, 12, 2}},
		{100, 1, Micro{100, 1, 100}},
	} {
		got := SplitShare(c.share, c.limit)
		if got != c.want {
			t.Errorf("SplitShare(%d, %d) = %+v, want %+v", c.share, c.limit, got, c.want)
		}
	}
	if s := (Micro{11, 4, 3}).Sizes(); len(s) != 3 || s[0] != 4 || s[1] != 4 || s[2] != 3 {
		t.Errorf("sizes %v, want [4 4 3]", s)
	}
	if ShareLimit(math.MaxInt/2, 3) != math.MaxInt || ShareLimit(0, 3) != 0 || ShareLimit(7, 3) != 21 {
		t.Error("ShareLimit")
	}
}
