package engine

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/internal/algo"
	"github.com/ringtail-ml/ringtail/internal/envcfg"
	"github.com/ringtail-ml/ringtail/internal/transport"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// An uneven AllToAll's program is built from its split sizes, so its cache
// key must tell apart any two calls whose sizes differ, even when the
// totals and everything else agree.
func TestProgramKeyCoversAllToAllSplits(t *testing.T) {
	e := newEngine(Settings{Comm: envcfg.Comm{Rank: 1, WorldSize: 3, SmallBytes: 64, Channels: 2}})
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

// hostRingOrder keeps each host's ranks together whatever the placement,
// and is nil (rank order) when the placement already does.
func TestHostRingOrder(t *testing.T) {
	eps := func(hosts ...string) []transport.Endpoint {
		out := make([]transport.Endpoint, len(hosts))
		for i, h := range hosts {
			out[i] = transport.Endpoint{Host: h}
		}
		return out
	}
	if got := hostRingOrder(eps("a", "b", "a", "b")); !slices.Equal(got, []int{0, 2, 1, 3}) {
		t.Fatalf("round-robin placement: %v, want [0 2 1 3]", got)
	}
	if got := hostRingOrder(eps("a", "a", "b", "b")); got != nil {
		t.Fatalf("block placement: %v, want nil (rank order)", got)
	}
	if got := hostRingOrder(eps("a", "a", "a")); got != nil {
		t.Fatalf("one host: %v, want nil", got)
	}
}

// routeIP finds the local address towards the rendezvous host, and names
// the host when it cannot (instead of advertising loopback to ranks on
// other hosts).
func TestRouteIP(t *testing.T) {
	// Lookups that succeed get a minute (a loaded machine may be slow to
	// answer); the one that cannot retries until its 300 ms deadline.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if ip, err := routeIP(ctx, "localhost"); err != nil || ip != "127.0.0.1" {
		t.Fatalf("localhost: %q, %v", ip, err)
	}
	if ip, err := routeIP(ctx, "127.0.0.1"); err != nil || ip != "127.0.0.1" {
		t.Fatalf("127.0.0.1: %q, %v", ip, err)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()
	_, err := routeIP(short, "no-such-host.invalid")
	if err == nil || !strings.Contains(err.Error(), `"no-such-host.invalid"`) || !strings.Contains(err.Error(), "RINGTAIL_LISTEN_IP") {
		t.Fatalf("unresolvable host: %v, want an error naming it and the way out", err)
	}
}

// lookup's plain-call shortcut returns what the full path (progKey, group
// key) returns, over a sequence that alternates plain calls with subgroup,
// point-to-point and tree calls and changes every field the shortcut
// compares: a stale shortcut would hand a call another call's program.
func TestLookupShortcutAgreesWithTheFullPath(t *testing.T) {
	e := newEngine(Settings{Comm: envcfg.Comm{Rank: 1, WorldSize: 4, SmallBytes: 64, Channels: 1, ChunkBytes: 1 << 20, PieceBytes: 128}})
	var err error
	if e.planner, err = algo.NewPlanner(e.plannerConfig(), algo.Facts{World: 4}); err != nil {
		t.Fatal(err)
	}
	calls := []algo.Spec{
		{Collective: wire.AllReduce, Count: 2, ElemSize: 4},
		{Collective: wire.AllReduce, Count: 2, ElemSize: 4},
		{Collective: wire.AllReduce, Count: 2, ElemSize: 4, Avg: true},
		{Collective: wire.AllReduce, Count: 2, ElemSize: 8},
		{Collective: wire.AllReduce, Count: 64, ElemSize: 4}, // past the small threshold
		{Collective: wire.AllReduce, Count: 2, ElemSize: 4, Members: []int{1, 2}},
		{Collective: wire.AllReduce, Count: 2, ElemSize: 4},
		{Collective: wire.Broadcast, Count: 2, ElemSize: 4},
		{Collective: wire.Broadcast, Count: 2, ElemSize: 4, Root: 3},
		{Collective: wire.PointToPoint, Count: 2, ElemSize: 4, Peer: 2, Send: true},
		{Collective: wire.AllReduceTree, Count: 2, ElemSize: 4, Children: []algo.Child{{Rank: 3}}},
		{Collective: wire.AllReduce, Count: 2, ElemSize: 4},
		{Collective: wire.Barrier},
		{Collective: wire.AllReduce, Count: 2, ElemSize: 4},
		{Collective: wire.AllReduce, Count: 64, ElemSize: 4}, // in pieces of 128 bytes below
		{Collective: wire.AllReduce, Count: 64, ElemSize: 4},
		{Collective: wire.AllReduce, Count: 64, ElemSize: 4},
	}
	pieces := map[int]bool{len(calls) - 3: true, len(calls) - 1: true} // pieces, then not, then pieces again
	for i, sp := range calls {
		c := &Call{Spec: sp}
		var ch algo.Choice
		if pieces[i] {
			ch.Kind = algo.KindPieces
		}
		g, p, err := e.lookup(c, ch)
		if err != nil {
			t.Fatalf("call %d (%+v): %v", i, sp, err)
		}
		k, gk, err := e.keyOf(c)
		if err != nil {
			t.Fatalf("call %d: keyOf: %v", i, err)
		}
		k.choice = ch
		if got := p.Algorithm == "ring-pieces"; got != pieces[i] {
			t.Fatalf("call %d (%+v): algorithm %s, want pieces %t", i, sp, p.Algorithm, pieces[i])
		}
		want, err := e.program(k, c)
		if err != nil {
			t.Fatalf("call %d: program: %v", i, err)
		}
		if p != want || g != e.groupOf(gk) {
			t.Fatalf("call %d (%+v): lookup gave program %p group %d, the full path %p group %d", i, sp, p, g.id, want, e.groupOf(gk).id)
		}
	}
}
