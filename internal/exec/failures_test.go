package exec

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/internal/algo"
	"github.com/ringtail-ml/ringtail/internal/plan"
	"github.com/ringtail-ml/ringtail/internal/reduce"
	"github.com/ringtail-ml/ringtail/internal/transport"
	"github.com/ringtail-ml/ringtail/internal/wire"
)

// paths are the executor's two data paths: the general one (links'
// reader and writer goroutines, here over the in-memory transport) and
// the fastbox one (synchronous, over shared memory).
var paths = []struct {
	name string
	opts clusterOpts
}{
	{"general", clusterOpts{}},
	{"fastbox", clusterOpts{shm: true, fast: true}},
}

// smallAllReduce is a float32 Sum allreduce of count elements of rank r,
// as the next world call.
func smallAllReduce(cl *cluster, r, count int) (*plan.Program, *Call) {
	sp := algo.Spec{Collective: wire.AllReduce, Count: count, ElemSize: 4}
	d := cl.next(r, wire.Desc{Collective: wire.AllReduce, DType: uint8(reduce.Float32), RedOp: uint8(reduce.Sum), Count: uint64(count)})
	return cl.program(sp, r), &Call{Desc: d, DType: reduce.Float32, Op: reduce.Sum, Data: make([]byte, 4*count)}
}

// recvFrom is a program that receives count elements from peer: the part
// of a call a test runs on a rank to know that the peer is inside it.
func recvFrom(rank, world, peer, count int) *plan.Program {
	return &plan.Program{Algorithm: "test-recv", Rank: rank, World: world, DataLen: count,
		Channels: []plan.Channel{{Steps: []plan.Step{{Ops: []plan.Op{{Kind: plan.Recv, Peer: peer, Buf: plan.Data, Len: count}}}}}}}
}

// wantWaitedOn checks that err is a kind failure naming rank as the one
// waited on.
func wantWaitedOn(t *testing.T, err error, kind transport.Kind, me, rank int) {
	t.Helper()
	te := transportError(t, me, err)
	if te.Kind != kind || te.Rank != rank {
		t.Fatalf("rank %d: got %v, want %v naming rank %d", me, err, kind, rank)
	}
	if want := fmt.Sprintf("ringtail rank %d: Timed out", me); kind == transport.KindTimeout && !strings.HasPrefix(te.Error(), want) {
		t.Fatalf("rank %d: %q does not start with %q", me, te.Error(), want)
	}
	if want := fmt.Sprintf("waiting on rank %d", rank); !strings.Contains(te.Error(), want) {
		t.Fatalf("rank %d: %q does not say %q", me, te.Error(), want)
	}
}

// A call ended by the operation timeout, by its context's deadline or by
// its context's cancellation reports the rank it was waiting on, and fails
// the mesh so the peers hear of it.
func TestCancellationNamesTheRankWaitedOn(t *testing.T) {
	const count = 4 // recursive doubling on both paths
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			t.Run("operation timeout", func(t *testing.T) {
				cl := newCluster(t, 2, path.opts)
				p, call := smallAllReduce(cl, 0, count)
				err := cl.run(context.Background(), 0, 20*time.Millisecond, p, call)
				wantWaitedOn(t, err, transport.KindTimeout, 0, 1)
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("%v does not wrap context.DeadlineExceeded", err)
				}
				if te := transportError(t, 1, waitFailed(t, cl, 1)); te.Kind != transport.KindTimeout || te.Reporter != 0 {
					t.Fatalf("rank 1 heard %v, want rank 0's timeout", te)
				}
			})
			t.Run("context deadline", func(t *testing.T) {
				cl := newCluster(t, 2, path.opts)
				p, call := smallAllReduce(cl, 0, count)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
				defer cancel()
				wantWaitedOn(t, cl.run(ctx, 0, time.Minute, p, call), transport.KindTimeout, 0, 1)
			})
			t.Run("context canceled mid-call", func(t *testing.T) {
				cl := newCluster(t, 2, path.opts)
				p, call := smallAllReduce(cl, 0, count)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				done := make(chan error, 1)
				go func() { done <- cl.run(ctx, 0, time.Minute, p, call) }()
				// Rank 1 takes rank 0's first message: rank 0 is in the
				// call, waiting for rank 1's.
				part := &Call{Desc: call.Desc, DType: reduce.Float32, Op: reduce.Sum, Data: make([]byte, 4*count)}
				if err := cl.run(context.Background(), 1, time.Minute, cl.path(recvFrom(1, 2, 0, count)), part); err != nil {
					t.Fatal(err)
				}
				cancel()
				err := <-done
				wantWaitedOn(t, err, transport.KindCanceled, 0, 1)
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("%v does not wrap context.Canceled", err)
				}
			})
			t.Run("context canceled before the call", func(t *testing.T) {
				cl := newCluster(t, 2, path.opts)
				p, call := smallAllReduce(cl, 0, count)
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				err := cl.run(ctx, 0, time.Minute, p, call)
				if te := transportError(t, 0, err); te.Kind != transport.KindCanceled {
					t.Fatalf("got %v, want a cancellation", err)
				}
			})
		})
	}
	t.Run("ring", func(t *testing.T) {
		cl := newCluster(t, 3, clusterOpts{})
		sp := algo.Spec{Collective: wire.AllReduce, Count: 3000, ElemSize: 4}
		d := cl.next(1, wire.Desc{Collective: wire.AllReduce, DType: uint8(reduce.Float32), RedOp: uint8(reduce.Sum), Count: 3000})
		call := &Call{Desc: d, DType: reduce.Float32, Op: reduce.Sum, Data: make([]byte, 4*3000)}
		// Rank 1's left neighbour, rank 0, never comes.
		wantWaitedOn(t, cl.run(context.Background(), 1, 20*time.Millisecond, cl.program(sp, 1), call), transport.KindTimeout, 1, 0)
	})
}

// waitFailed waits for rank r's mesh to fail and returns why.
func waitFailed(t *testing.T, cl *cluster, r int) error {
	t.Helper()
	select {
	case <-cl.meshes[r].Failed():
		return cl.meshes[r].Err()
	case <-time.After(time.Minute):
		t.Fatalf("rank %d's mesh never failed", r)
	}
	return nil
}

// A peer that vanishes in the middle of a program (after its first step)
// fails the ranks still in it, naming the peer; with TolerateDeaths too,
// because the call involves it. A tolerant mesh goes on with calls that do
// not involve the dead rank, and fails at once one that does.
func TestAPeerThatVanishesMidPlanIsNamed(t *testing.T) {
	for _, tolerate := range []bool{false, true} {
		t.Run(fmt.Sprintf("tolerate=%v", tolerate), func(t *testing.T) {
			cl := newCluster(t, 3, clusterOpts{tolerate: tolerate})
			const count = 3000
			sp := algo.Spec{Collective: wire.AllReduce, Count: count, ElemSize: 4}
			d := wire.Desc{Collective: wire.AllReduce, DType: uint8(reduce.Float32), RedOp: uint8(reduce.Sum), Count: count}
			errs := make(chan error, 2)
			for r := range 2 {
				p, call := cl.program(sp, r), &Call{Desc: cl.next(r, d), DType: reduce.Float32, Op: reduce.Sum, Data: make([]byte, 4*count)}
				go func() { errs <- cl.run(context.Background(), r, time.Minute, p, call) }()
			}
			// Rank 2 runs the first step of its program on every channel,
			// then dies.
			full := cl.program(sp, 2)
			first := *full
			first.Channels = nil
			for _, ch := range full.Channels {
				first.Channels = append(first.Channels, plan.Channel{Steps: ch.Steps[:1]})
			}
			if err := cl.run(context.Background(), 2, time.Minute, &first, &Call{Desc: cl.next(2, d), DType: reduce.Float32, Op: reduce.Sum, Data: make([]byte, 4*count)}); err != nil {
				t.Fatal(err)
			}
			cl.net.(*transport.Inmem).Sever(cl.lns[2].Endpoint())
			for range 2 {
				err := <-errs
				te := transportError(t, -1, err)
				if te.Kind != transport.KindPeerDied || te.Rank != 2 {
					t.Fatalf("got %v, want rank 2's death", err)
				}
			}
		})
	}
	t.Run("tolerated death before the call", func(t *testing.T) {
		cl := newCluster(t, 3, clusterOpts{tolerate: true})
		deaths := []<-chan struct{}{cl.meshes[0].Deaths(), cl.meshes[1].Deaths()}
		cl.net.(*transport.Inmem).Sever(cl.lns[2].Endpoint())
		for _, d := range deaths {
			<-d
		}
		among := call{"ring among the living", algo.Spec{Collective: wire.AllReduce, Count: 700, Members: []int{1, 0}}, "ring"}
		among.check(t, cl, reduce.Float32, reduce.Sum)
		p, c := smallAllReduce(cl, 0, 4)
		err := cl.run(context.Background(), 0, time.Minute, p, c)
		if te := transportError(t, 0, err); te.Kind != transport.KindPeerDied || te.Rank != 2 {
			t.Fatalf("a call involving the dead rank: %v, want rank 2's death", err)
		}
	})
}

// Ranks that make different calls fail with a mismatch naming the peer, on
// every rank: different counts on either path, and one rank on the ring
// while the other uses its fastbox.
func TestMismatchedCallsAreCaught(t *testing.T) {
	for _, path := range paths {
		t.Run(path.name+" counts", func(t *testing.T) {
			cl := newCluster(t, 2, path.opts)
			progs, calls := [2]*plan.Program{}, [2]*Call{}
			for r, count := range []int{4, 6} {
				progs[r], calls[r] = smallAllReduce(cl, r, count)
			}
			errs := cl.each(cl.all(), func(r int) error { return cl.run(context.Background(), r, time.Minute, progs[r], calls[r]) })
			for r, err := range errs {
				if te := transportError(t, r, err); te.Kind != transport.KindMismatch || te.Rank != 1-r && te.Reporter == r {
					t.Fatalf("rank %d: got %v, want a mismatch", r, err)
				}
			}
		})
	}
	t.Run("ring against fastbox", func(t *testing.T) {
		cl := newCluster(t, 2, clusterOpts{shm: true, fast: true})
		small, smallCall := smallAllReduce(cl, 0, 4)
		big := algo.Spec{Collective: wire.AllReduce, Count: 1000, ElemSize: 4}
		bigDesc := cl.next(1, wire.Desc{Collective: wire.AllReduce, DType: uint8(reduce.Float32), RedOp: uint8(reduce.Sum), Count: 1000})
		bigCall := &Call{Desc: bigDesc, DType: reduce.Float32, Op: reduce.Sum, Data: make([]byte, 4000)}
		// Rank 1's program is forced off the fastbox path, as a rank with
		// another small-message threshold would be.
		bigProg := cl.program(big, 1)
		bigProg.General = true
		errs := cl.each(cl.all(), func(r int) error {
			if r == 0 {
				return cl.run(context.Background(), 0, time.Minute, small, smallCall)
			}
			return cl.run(context.Background(), 1, time.Minute, bigProg, bigCall)
		})
		for r, err := range errs {
			if te := transportError(t, r, err); te.Kind != transport.KindMismatch {
				t.Fatalf("rank %d: got %v, want a mismatch", r, err)
			}
		}
	})
}

// A rank whose ring receive makes no progress while the peer's small call
// of the same number waits in its fastbox reports a mismatch: the peer made
// a smaller call and will never send what this rank waits for.
func TestARingReceiveAgainstAFastboxMessageIsAMismatch(t *testing.T) {
	cl := newCluster(t, 2, clusterOpts{shm: true, fast: true})
	d := wire.Desc{Collective: wire.Broadcast, DType: uint8(reduce.Float32), Call: 1}
	small := &plan.Program{Algorithm: "test-send", Rank: 0, World: 2, DataLen: 4,
		Channels: []plan.Channel{{Steps: []plan.Step{{Ops: []plan.Op{{Kind: plan.Send, Peer: 1, Buf: plan.Data, Len: 4}}}}}}}
	smallDesc := d
	smallDesc.Count = 4
	if err := cl.run(context.Background(), 0, time.Minute, cl.path(small), &Call{Desc: smallDesc, DType: reduce.Float32, Data: make([]byte, 16)}); err != nil {
		t.Fatal(err)
	}
	big := recvFrom(1, 2, 0, 1<<18)
	big.General = true
	bigDesc := d
	bigDesc.Count = 1 << 18
	err := cl.run(context.Background(), 1, time.Minute, big, &Call{Desc: bigDesc, DType: reduce.Float32, Data: make([]byte, 1<<20)})
	if te := transportError(t, 1, err); te.Kind != transport.KindMismatch || te.Rank != 0 {
		t.Fatalf("got %v, want a mismatch naming rank 0", err)
	}
}

// The stall rules catch disagreements that send no data: two ranks that
// each believe the other is the root of a broadcast both wait to receive,
// until one asks the other what it is doing.
func TestABroadcastRootDisagreementWithoutDataIsCaught(t *testing.T) {
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			cl := newCluster(t, 2, path.opts)
			progs, calls := [2]*plan.Program{}, [2]*Call{}
			for r := range 2 {
				sp := algo.Spec{Collective: wire.Broadcast, Count: 8, ElemSize: 4, Root: 1 - r}
				progs[r] = cl.program(sp, r)
				calls[r] = &Call{Desc: cl.next(r, wire.Desc{Collective: wire.Broadcast, DType: uint8(reduce.Float32), Root: uint32(1 - r), Count: 8}),
					DType: reduce.Float32, Data: make([]byte, 32)}
			}
			errs := cl.each(cl.all(), func(r int) error { return cl.run(context.Background(), r, time.Minute, progs[r], calls[r]) })
			for r, err := range errs {
				te := transportError(t, r, err)
				if te.Kind != transport.KindMismatch || !strings.Contains(te.Detail, "root") {
					t.Fatalf("rank %d: got %v, want a mismatch on the root", r, err)
				}
			}
		})
	}
}

// A data frame held without a receive is judged while a call waits: from
// a call this rank has finished (without receiving it), or from this call
// by a peer this rank's part does not receive from, it is a mismatch
// naming the sender.
func TestAHeldFrameIsCaught(t *testing.T) {
	// stray is rank 2's part of call: a message to rank 0. It completes
	// when rank 0 reads it (never, over net.Pipe) or fails with the mesh.
	stray := func(cl *cluster, call uint64) (*plan.Program, *Call) {
		// General: a ring frame, which rank 0's reader holds, also
		// where rank 0 runs on fastboxes.
		p := &plan.Program{Algorithm: "test-send", Rank: 2, World: 3, DataLen: 4, General: true,
			Channels: []plan.Channel{{Steps: []plan.Step{{Ops: []plan.Op{{Kind: plan.Send, Peer: 0, Buf: plan.Data, Len: 4}}}}}}}
		return p, &Call{Desc: wire.Desc{Collective: wire.AllReduce, DType: uint8(reduce.Float32), Call: call, Count: 4}, DType: reduce.Float32, Data: make([]byte, 16)}
	}
	for _, path := range paths {
		t.Run(path.name+" of a finished call", func(t *testing.T) {
			cl := newCluster(t, 3, path.opts)
			// Rank 2 sends rank 0 its part of call #1, which rank 0
			// finishes without receiving from it (an empty program).
			p, c := stray(cl, 1)
			sent := make(chan error, 1)
			go func() { sent <- cl.run(context.Background(), 2, time.Minute, p, c) }()
			defer func() { <-sent }()
			empty := &plan.Program{Algorithm: "test-empty", Rank: 0, World: 3, DataLen: 4}
			if err := cl.run(context.Background(), 0, time.Minute, cl.path(empty), &Call{Desc: c.Desc, DType: reduce.Float32, Data: make([]byte, 16)}); err != nil {
				t.Fatal(err)
			}
			// Call #2: rank 0 waits on rank 1, which never comes.
			wait := &Call{Desc: wire.Desc{Collective: wire.AllReduce, DType: uint8(reduce.Float32), Call: 2, Count: 4}, DType: reduce.Float32, Data: make([]byte, 16)}
			err := cl.run(context.Background(), 0, time.Minute, cl.path(recvFrom(0, 3, 1, 4)), wait)
			te := transportError(t, 0, err)
			if te.Kind != transport.KindMismatch || te.Rank != 2 || !strings.Contains(te.Detail, "finished that call without receiving") {
				t.Fatalf("got %v, want a mismatch naming rank 2's held frame", err)
			}
		})
		t.Run(path.name+" of this call from a peer not received from", func(t *testing.T) {
			cl := newCluster(t, 3, path.opts)
			p, c := stray(cl, 1)
			sent := make(chan error, 1)
			go func() { sent <- cl.run(context.Background(), 2, time.Minute, p, c) }()
			defer func() { <-sent }()
			err := cl.run(context.Background(), 0, time.Minute, cl.path(recvFrom(0, 3, 1, 4)), &Call{Desc: c.Desc, DType: reduce.Float32, Data: make([]byte, 16)})
			te := transportError(t, 0, err)
			if te.Kind != transport.KindMismatch || te.Rank != 2 || !strings.Contains(te.Detail, "does not receive") {
				t.Fatalf("got %v, want a mismatch naming rank 2", err)
			}
		})
	}
}
