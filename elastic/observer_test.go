package elastic

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A launcher's observer is every worker's only seed: three workers form
// generation 1 through it (it is never a member), the observer reports
// the joins and the view; one worker crashes and the observer reports it
// left and the survivors' view; a joiner seeded only with the observer
// learns the running job's view at join and is added (it does not start a
// job of its own).
func TestObserverSeedsTheJobAndWatchesIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	obs, err := Observe(ObserverConfig{JobID: "elastic-test", Secret: testSecret, BindAddr: "127.0.0.1", Timers: testTimers(), Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	seeds := []string{obs.Addr()}
	c := newCluster(t)
	ports := freePorts(t, 4)
	ids := []string{"a", "b", "c"}
	c.startAll(ctx, ids, ports, seeds, 2, 3)

	// next returns the next observer event satisfying ok.
	next := func(what string, ok func(ObserverEvent) bool) ObserverEvent {
		t.Helper()
		for {
			select {
			case e := <-obs.Events():
				if ok(e) {
					return e
				}
			case <-ctx.Done():
				t.Fatalf("observer: timed out waiting for %s", what)
			}
		}
	}
	names := map[string]string{} // id → node name
	first := next("generation 1", func(e ObserverEvent) bool {
		if e.Joined != "" {
			id, _, _ := strings.Cut(e.Joined, ".")
			names[id] = e.Joined
		}
		return e.View != nil
	})
	if first.View.Gen != 1 || len(first.View.Members) != 3 {
		t.Fatalf("first view %+v, want generation 1 with the three workers", first.View)
	}
	for _, m := range first.View.Members {
		if isObserver(m) {
			t.Fatalf("the observer is a member: %v", first.View.Members)
		}
	}
	c.waitAll(30*time.Second, "generation 1", ids, func(e stepEvent) bool { return e.gen == 1 && e.step >= 2 })

	victim := c.worker("b").Name()
	c.worker("b").crashForTest()
	// The survivors' new view may reach the observer before its own
	// failure detector declares the victim dead: wait for both, in either
	// order.
	var shrunk *ObserverEvent
	left := false
	next("the crashed worker to leave and a generation without it", func(e ObserverEvent) bool {
		if e.Left == victim {
			left = true
		}
		if shrunk == nil && e.View != nil && !e.View.Contains(victim) {
			shrunk = &e
		}
		return left && shrunk != nil
	})
	c.waitAll(20*time.Second, "the survivors' generation", []string{"a", "c"}, func(e stepEvent) bool { return e.gen >= shrunk.View.Gen })

	c.start(ctx, testConfig("d", ports[3], seeds, 2, 3))
	grown := c.waitAll(30*time.Second, "a generation with the joiner", []string{"a", "c", "d"}, func(e stepEvent) bool {
		return e.gen > shrunk.View.Gen && e.size == 3
	})
	if e := grown["d"]; e.rank != 2 || !e.rejoined || e.step == 0 {
		t.Fatalf("joiner: %+v, want the last rank, rejoined, at the job's step (not a new job)", e)
	}
	c.stop([]string{"a", "c", "d"})
}
