package algo

import (
	"testing"

	"github.com/ringtail-ml/ringtail/internal/plan"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// AllReduceLate takes the late-rank ring with the late rank from Root,
// in units between lateMinBytes and lateMaxBytes, and refuses a late rank
// outside the world.
func TestChooseAllReduceLate(t *testing.T) {
	tun := Tunables{SmallBytes: 4 << 10, Channels: 1, ChunkBytes: 1 << 20}
	for _, tc := range []struct {
		world, count, esize int
		wantChunk           int // elements
	}{
		{4, 10, 4, lateMinBytes / 4},                 // tiny: one unit
		{4, 16 << 20 / 4, 4, lateMaxBytes / 4},       // 16 MiB: capped
		{8, 16 << 20 / 4, 4, (16<<20/4/7 + 15) / 16}, // a sixteenth of a segment
		{8, 16 << 20 / 2, 2, (16<<20/2/7 + 15) / 16}, // in elements of the type
	} {
		s := Spec{Collective: wire.AllReduceLate, World: tc.world, Rank: 1, Root: 2, Count: tc.count, ElemSize: tc.esize}
		if got := lateChunk(s, tun); got != tc.wantChunk {
			t.Errorf("%+v: chunk %d, want %d", tc, got, tc.wantChunk)
		}
		p, err := Choose(s, tun)
		if err != nil {
			t.Fatal(err)
		}
		if p.Algorithm != "ring-late" || Name(s, tun) != "ring-late" {
			t.Errorf("%+v: algorithm %q, name %q", tc, p.Algorithm, Name(s, tun))
		}
		// Rank 2 is late: it sends and receives only in the completion.
		s.Rank = 2
		lp, err := Choose(s, tun)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range lp.Channels[0].Steps {
			for _, o := range st.Ops {
				if o.Kind == plan.RecvReduce {
					t.Fatalf("the late rank folds: %v", o)
				}
			}
		}
	}
	if got := lateChunk(Spec{World: 4, Count: 1 << 30, ElemSize: 4}, Tunables{Channels: 1, ChunkBytes: 64 << 10}); got != 16<<10 {
		t.Errorf("a smaller ChunkBytes caps the unit: %d elements", got)
	}
	for _, late := range []int{-1, 4} {
		if _, err := Choose(Spec{Collective: wire.AllReduceLate, World: 4, Rank: 0, Root: late, Count: 8, ElemSize: 4}, tun); err == nil {
			t.Errorf("late rank %d accepted", late)
		}
	}
}
