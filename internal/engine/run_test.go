package engine

import (
	"testing"

	"github.com/ringtail-ml/ringtail/internal/algo"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// An uneven AllToAll's program is built from its split sizes, so its cache
// key must tell apart any two calls whose sizes differ, even when the
// totals and everything else agree.
func TestProgramKeyCoversAllToAllSplits(t *testing.T) {
	e := &Engine{s: Settings{Rank: 1, World: 3, Tunables: algo.Tunables{SmallBytes: 64, Channels: 2}}}
	key := func(send, recv []int) progKey {
		c := &Call{Spec: algo.Spec{Collective: wire.AllToAll, ElemSize: 4, Root: int(wire.AllToAllUneven), SendCounts: send, RecvCounts: recv}}
		k, gk, err := e.keyOf(c)
		if err != nil || gk != "" {
			t.Fatalf("keyOf: %q %v", gk, err)
		}
		return k
	}
	a := key([]int{1, 2, 3}, []int{4, 2, 0})
	if a != key([]int{1, 2, 3}, []int{4, 2, 0}) {
		t.Fatal("equal splits give different keys")
	}
	for _, other := range []progKey{
		key([]int{2, 1, 3}, []int{4, 2, 0}), // same total sent
		key([]int{1, 2, 3}, []int{0, 2, 4}), // same total received
		key([]int{1, 2, 3, 0}, []int{4, 2}), // the same numbers, split differently
		key([]int{12, 3}, []int{4, 2, 0}),   // digits that run together
		key([]int{1, 2, 3}, []int{4, 2, 0, 0}),
	} {
		if other == a {
			t.Fatalf("splits that differ share the key %+v", a)
		}
	}
	even := &Call{Spec: algo.Spec{Collective: wire.AllToAll, Count: 2, ElemSize: 4}}
	if k, _, _ := e.keyOf(even); k == a || k.splits != "" {
		t.Fatalf("the even exchange's key %+v", k)
	}
}
