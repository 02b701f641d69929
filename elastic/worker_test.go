package elastic

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"
)

// Four goroutine ranks start behind the barrier (generation 1, ranks in ID
// order); one crashes (its memberlist stops answering): the survivors form
// a later generation of three and keep training; a fifth rank joins and a
// generation of four including it forms; models stay bit-identical.
func TestInProcessDeathAndJoin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := newCluster(t)
	ports := freePorts(t, 5)
	seeds := seedList(ports)
	ids := []string{"rank-0", "rank-1", "rank-2", "rank-3"}
	c.startAll(ctx, ids, ports, seeds, 2, 4)
	first := c.waitAll(30*time.Second, "generation 1 on all four", ids, func(e stepEvent) bool { return e.step >= 3 })
	for i, id := range ids {
		e := first[id]
		if e.gen != 1 || e.size != 4 || e.rank != i {
			t.Fatalf("%s: %+v, want generation 1 rank %d of 4", id, e, i)
		}
	}

	crashed := time.Now()
	c.worker("rank-2").crashForTest()
	survivors := []string{"rank-0", "rank-1", "rank-3"}
	after := c.waitAll(15*time.Second, "a generation of three", survivors, func(e stepEvent) bool { return e.gen > 1 && e.size == 3 })
	t.Logf("crash → all survivors stepping in generation %d: %v", after["rank-0"].gen, time.Since(crashed))
	for i, id := range survivors {
		if e := after[id]; e.rank != i {
			t.Fatalf("%s: rank %d in generation %d, want %d (survivors keep their order)", id, e.rank, e.gen, i)
		}
	}

	g := after["rank-0"].gen
	c.start(ctx, testConfig("rank-4", ports[4], seeds, 2, 4))
	all := append(slices.Clone(survivors), "rank-4")
	grown := c.waitAll(20*time.Second, "a generation of four with the joiner", all, func(e stepEvent) bool { return e.gen > g && e.size == 4 })
	if e := grown["rank-4"]; e.rank != 3 || !e.fresh || !e.rejoined {
		t.Fatalf("joiner: %+v, want rank 3 (joiners are appended), fresh, rejoined", e)
	}
	for _, id := range survivors {
		if e := grown[id]; !e.fresh || e.rejoined {
			t.Fatalf("%s: %+v, want fresh, not rejoined", id, e)
		}
	}
	t.Logf("joined: generation %d", grown["rank-4"].gen)
	c.stop(all)
}

// With min-np 3, losing one of three ranks leaves the job waiting for a
// join; none comes within MinWait, so every survivor's Run fails with
// ErrBelowMinNP.
func TestInProcessBelowMinNP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := newCluster(t)
	ports := freePorts(t, 3)
	seeds := seedList(ports)
	ids := []string{"a", "b", "c"}
	for i, id := range ids {
		cfg := testConfig(id, ports[i], seeds, 3, 3)
		cfg.MinWait = 1500 * time.Millisecond
		c.start(ctx, cfg)
	}
	c.waitAll(30*time.Second, "generation 1", ids, func(e stepEvent) bool { return e.step >= 2 })
	c.worker("c").crashForTest()
	start := time.Now()
	for _, id := range []string{"a", "b"} {
		select {
		case err := <-c.ranks[id].result:
			if !errors.Is(err, ErrBelowMinNP) {
				t.Fatalf("%s: Run returned %v, want ErrBelowMinNP", id, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: still running below min-np", id)
		}
	}
	if d := time.Since(start); d < 1500*time.Millisecond {
		t.Fatalf("gave up after %v, before MinWait", d)
	}
	for _, id := range []string{"a", "b"} {
		c.worker(id).Close()
	}
}

// Below min-np a join within MinWait rescues the job.
func TestInProcessBelowMinNPRescuedByJoin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := newCluster(t)
	ports := freePorts(t, 4)
	seeds := seedList(ports)
	ids := []string{"a", "b", "c"}
	c.startAll(ctx, ids, ports, seeds, 3, 3)
	c.waitAll(30*time.Second, "generation 1", ids, func(e stepEvent) bool { return e.step >= 2 })
	c.worker("c").crashForTest()
	// Wait until both survivors' failure detectors have declared c dead:
	// below min-np now, no generation may form.
	for _, id := range []string{"a", "b"} {
		for c.worker(id).ml.NumMembers() != 2 {
			if ctx.Err() != nil {
				t.Fatalf("%s never declared c dead", id)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for len(c.events) > 0 {
		if e := <-c.events; e.gen > 1 {
			t.Fatalf("a generation formed below min-np: %+v", e)
		}
	}
	c.start(ctx, testConfig("d", ports[3], seeds, 3, 3))
	c.waitAll(20*time.Second, "a generation with the joiner", []string{"a", "b", "d"}, func(e stepEvent) bool { return e.gen > 1 && e.size == 3 })
	c.stop([]string{"a", "b", "d"})
}

// Join, train, stop and Close leave no goroutine behind (memberlist, the
// loop, its helpers, rendezvous servers and communicators all end).
func TestInProcessCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		c := newCluster(t)
		ports := freePorts(t, 2)
		seeds := seedList(ports)
		ids := []string{"a", "b"}
		c.startAll(ctx, ids, ports, seeds, 1, 2)
		c.waitAll(30*time.Second, "generation 1", ids, func(e stepEvent) bool { return e.step >= 2 })
		c.stop(ids)
	}()
	deadline := time.Now().Add(time.Minute)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}
