package ringtail

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestAllReduceAmongLeavesOthersFree(t *testing.T) {
	comms := startComms(t, 5, func(c *Config) { c.SmallBytes = 64 })
	ctx := context.Background()
	members := []int{4, 1, 3}
	for _, count := range []int{3, 5000} {
		bufs := make([][]float32, 5)
		for r := range bufs {
			bufs[r] = make([]float32, count)
			for i := range bufs[r] {
				bufs[r][i] = float32(r + 1)
			}
		}
		noErrors(t, each(comms, func(r int, c *Comm) error {
			if r == 0 || r == 2 {
				return nil // not members: they do not call
			}
			return c.AllReduceAmong(ctx, Float32s(bufs[r]), Sum, members)
		}))
		for r := range bufs {
			want := float32(r + 1)
			if r == 1 || r == 3 || r == 4 {
				want = 2 + 4 + 5
			}
			for i := range bufs[r] {
				if bufs[r][i] != want {
					t.Fatalf("count %d rank %d elem %d = %v want %v", count, r, i, bufs[r][i], want)
				}
			}
		}
	}
	// A full collective still works afterwards: per-link numbering kept every rank in step.
	noErrors(t, each(comms, func(r int, c *Comm) error { return c.Barrier(ctx) }))
}

func TestAllReduceAmongWithDifferentMembersIsAMismatch(t *testing.T) {
	comms := startComms(t, 3, nil)
	errs := each(comms, func(r int, c *Comm) error {
		members := []int{0, 1, 2}
		if r == 2 {
			members = []int{0, 2, 1}
		}
		return c.AllReduceAmong(context.Background(), Float32s(make([]float32, 4)), Sum, members)
	})
	for r, err := range errs {
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

func TestSendRecvPointToPoint(t *testing.T) {
	comms := startComms(t, 3, nil)
	ctx := context.Background()
	payload := make([]int64, 300000) // several chunks
	for i := range payload {
		payload[i] = int64(i * 7)
	}
	got := make([]int64, len(payload))
	noErrors(t, each(comms, func(r int, c *Comm) error {
		switch r {
		case 0:
			return c.Send(ctx, 2, Int64s(payload))
		case 2:
			return c.Recv(ctx, 0, Int64s(got))
		}
		return nil
	}))
	for i := range got {
		if got[i] != payload[i] {
			t.Fatalf("elem %d = %d", i, got[i])
		}
	}
}

func TestContributionsArriveEagerlyAndDeadlinesAreNotFailures(t *testing.T) {
	comms := startComms(t, 3, func(c *Config) { c.ChunkBytes = 4096 })
	ctx := context.Background()
	// Nobody has contributed: a deadline passes without breaking the communicator.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := comms[0].NextContribution(short, []int{1, 2}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the deadline", err)
	}
	big := make([]float32, 10000) // 40 KB: ten frames
	for i := range big {
		big[i] = float32(i)
	}
	// Ranks 1 and 2 contribute before rank 0 asks; rank 2 twice with different tags.
	if err := comms[2].Contribute(ctx, 0, Float32s(big), 7); err != nil {
		t.Fatal(err)
	}
	if err := comms[1].Contribute(ctx, 0, Float32s([]float32{1, 2, 3}), 9); err != nil {
		t.Fatal(err)
	}
	if err := comms[2].Contribute(ctx, 0, Float32s([]float32{5}), 8); err != nil {
		t.Fatal(err)
	}
	// Asking only for rank 1 skips rank 2's earlier one, which stays available.
	c1, err := comms[0].NextContribution(ctx, []int{1})
	if err != nil || c1.From != 1 || c1.Tag != 9 || c1.Data.Len() != 3 {
		t.Fatalf("%+v %v", c1, err)
	}
	c1.Release()
	c2, err := comms[0].NextContribution(ctx, []int{2})
	if err != nil || c2.From != 2 || c2.Tag != 7 || c2.Data.Len() != 10000 {
		t.Fatalf("%+v %v", c2, err)
	}
	for i, v := range viewF32(c2.Data) {
		if v != float32(i) {
			t.Fatalf("elem %d = %v", i, v)
		}
	}
	c2.Release()
	c3, err := comms[0].NextContribution(ctx, []int{1, 2})
	if err != nil || c3.Tag != 8 {
		t.Fatalf("%+v %v", c3, err)
	}
	c3.Release()
	// Collectives still line up after eager traffic on the same links.
	noErrors(t, each(comms, func(r int, c *Comm) error {
		return c.AllReduce(ctx, Float32s(make([]float32, 5000)), Sum)
	}))
}

func TestToleratedDeathLeavesTheLivingWorking(t *testing.T) {
	comms := startComms(t, 4, func(c *Config) { c.TolerateDeaths = true; c.PeerTimeout = time.Second })
	ctx := context.Background()
	comms[3].Close() // rank 3 leaves between steps
	for deadline := time.Now().Add(time.Minute); len(comms[0].Dead()) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("rank 0 never noticed rank 3's close")
		}
	}
	// The living still contribute and reduce among themselves.
	noErrors(t, each(comms[:3], func(r int, c *Comm) error {
		if r > 0 {
			if err := c.Contribute(ctx, 0, Float32s([]float32{float32(r)}), 1); err != nil {
				return err
			}
		} else {
			for i := 0; i < 2; i++ {
				ct, err := c.NextContribution(ctx, []int{1, 2, 3})
				if err != nil {
					return err
				}
				ct.Release()
			}
		}
		buf := []float32{float32(r)}
		if err := c.AllReduceAmong(ctx, Float32s(buf), Sum, []int{0, 1, 2}); err != nil {
			return err
		}
		if buf[0] != 3 {
			return fmt.Errorf("rank %d: sum %v", r, buf[0])
		}
		return nil
	}))
	// A call that needs rank 3 fails, naming it.
	err := comms[0].Send(ctx, 3, Float32s([]float32{1}))
	if rank, ok := RankOf(err); !ok || rank != 3 {
		t.Fatalf("send to the dead: %v", err)
	}
}
