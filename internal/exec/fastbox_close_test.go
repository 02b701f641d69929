//go:build linux

package exec

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/internal/transport"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// A rank whose fastbox to a peer is full (two messages the peer never
// took) waits for a free slot; when the peer closes its communicator
// instead, the wait fails at once naming the peer's close — it does not
// wait out its timeout (the caught CI run: "Timed out in AllReduce
// waiting on rank 1" where rank 1 had closed).
func TestAFullFastboxFailsWhenThePeerCloses(t *testing.T) {
	c := newCluster(t, 2, clusterOpts{shm: true, fast: true})
	fl, ok := c.meshes[0].Link(1, 0).Fast()
	if !ok {
		t.Skip("no fastbox between the two ranks (shared memory unavailable)")
	}
	d := wire.Desc{Collective: wire.AllReduce, Call: 1, Count: 1}
	msg := make([]byte, 4)
	for i := range 2 {
		if err := fl.Send(&d, msg, time.Minute, nil, nil); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	// The third send waits for a slot; Waiting says it is waiting (after
	// transport.WaitReport), and only then does rank 1 close.
	waiting := make(chan struct{})
	var once sync.Once
	stall := &transport.Stall{
		Done:    func(uint32) uint64 { return 0 },
		Expects: func(int, int) bool { return false },
		Waiting: func(int, time.Time, time.Time) { once.Do(func() { close(waiting) }) },
	}
	done := make(chan error, 1)
	go func() { done <- fl.Send(&d, msg, 10*time.Minute, nil, stall) }()
	select {
	case <-waiting:
	case err := <-done:
		t.Fatalf("the third send did not wait: %v", err)
	}
	if err := c.meshes[1].Close(); err != nil {
		t.Fatal(err)
	}
	err := <-done
	var e *transport.Error
	if !errors.As(err, &e) || e.Kind != transport.KindClosed || e.Rank != 1 {
		t.Fatalf("the third send: %v, want rank 1's close", err)
	}
}
