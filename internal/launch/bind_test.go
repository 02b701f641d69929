package launch

import (
	"math/bits"
	"testing"
)

func TestCPUSlotSpreadsRanksAndSeparatesPartners(t *testing.T) {
	for ncpu := 1; ncpu <= 8; ncpu++ {
		for world := 2; world <= 24; world++ {
			count := make([]int, ncpu)
			slot := make([]int, world)
			for r := range world {
				s := cpuSlot(r, world, ncpu)
				if s < 0 || s >= ncpu {
					t.Fatalf("cpuSlot(%d, %d, %d) = %d, outside the CPUs", r, world, ncpu, s)
				}
				slot[r] = s
				count[s]++
			}
			lo, hi := world, 0
			for _, n := range count {
				lo, hi = min(lo, n), max(hi, n)
			}
			if hi-lo > 1 {
				t.Errorf("%d ranks on %d CPUs: per-CPU counts %v are uneven", world, ncpu, count)
			}
			if world <= ncpu && hi > 1 {
				t.Errorf("%d ranks fit %d CPUs but share one: %v", world, ncpu, count)
			}
			if ncpu%2 != 0 || world <= ncpu {
				continue
			}
			for a := range world {
				for b := a + 1; b < world; b++ {
					if bits.OnesCount(uint(a^b)) == 1 && slot[a] == slot[b] {
						t.Errorf("%d ranks on %d CPUs: partners %d and %d share CPU %d", world, ncpu, a, b, slot[a])
					}
				}
			}
		}
	}
}
