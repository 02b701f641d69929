package train

import "testing"

func TestShardIsDisjointCoveringAndBalanced(t *testing.T) {
	for world := 1; world <= 9; world++ {
		for n := 0; n <= 70; n++ {
			next, smallest, largest := 0, n, 0
			for r := range world {
				lo, hi := Shard(n, r, world)
				if lo != next || hi < lo {
					t.Fatalf("n=%d world=%d rank %d: [%d,%d), want to start at %d", n, world, r, lo, hi, next)
				}
				next = hi
				smallest, largest = min(smallest, hi-lo), max(largest, hi-lo)
			}
			if next != n {
				t.Fatalf("n=%d world=%d: shards cover %d rows", n, world, next)
			}
			if largest-smallest > 1 {
				t.Fatalf("n=%d world=%d: shard sizes from %d to %d", n, world, smallest, largest)
			}
		}
	}
}
