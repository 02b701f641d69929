package emulate

import (
	"math"
	"testing"
)

// The live driver's plan (straggler.Policy with the memory plan, seeded
// with the device priors and fed the emulated step times) on AntDT's
// cluster B matches Eq. 4's solution: every step at 768/1600 = 0.48 s,
// no micro-batch above the 121-sample cap (AntDTDriver checks each).
func TestAntDTDriverMatchesEq4(t *testing.T) {
	c := V100P100Case(768 * 30)
	live, err := AntDTDriver(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(live.StepS) != 30 {
		t.Fatalf("%d steps, want 30", len(live.StepS))
	}
	for k, step := range live.StepS {
		slowest := 0.0
		for _, s := range step {
			slowest = math.Max(slowest, s)
		}
		if math.Abs(slowest-0.48) > 0.005 {
			t.Fatalf("step %d takes %.4f s (by rank %v), want Eq. 4's 0.48", k, slowest, step)
		}
	}
	// With one pass (MaxAccum 1) the memory caps the V100s at 121 and the
	// plan is Eq. 3's under the cap, adjust-bs: the P100s take 71, 0.71 s.
	c.MaxAccum = 1
	one, err := AntDTDriver(c)
	if err != nil {
		t.Fatal(err)
	}
	last := one.StepS[len(one.StepS)-1]
	if math.Abs(last[0]-121.0/300) > 1e-9 || math.Abs(last[7]-0.71) > 1e-9 {
		t.Fatalf("one pass: last step %v, want the V100s at 121/300 s and the P100s at 0.71 s", last)
	}
}
