package ringtail

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func startMailboxes(t *testing.T, n int, limit int) ([]*Comm, []*Mailbox) {
	t.Helper()
	comms := startComms(t, n, nil)
	boxes := make([]*Mailbox, n)
	for r, c := range comms {
		m, err := NewMailbox(c, limit)
		if err != nil {
			t.Fatal(err)
		}
		boxes[r] = m
	}
	t.Cleanup(func() { // before the comms' cleanup (LIFO)
		for _, m := range boxes {
			m.Close()
		}
	})
	return comms, boxes
}

// testCtx bounds a test's waits, so a bug fails the test instead of
// hanging it.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func ints(n int, base int64) []int64 {
	v := make([]int64, n)
	for i := range v {
		v[i] = base + int64(i)
	}
	return v
}

// Receives match by tag, not arrival order; messages with one tag from one
// rank arrive in the order they were sent.
func TestMailboxMatchesTagsAndKeepsOrder(t *testing.T) {
	_, boxes := startMailboxes(t, 2, 0)
	ctx := testCtx(t)
	const k = 20
	noErrors(t, eachBox(boxes, func(r int, m *Mailbox) error {
		if r == 0 {
			for i := range k {
				if err := m.Send(ctx, 1, 7, Int64s(ints(3, int64(100*i)))); err != nil {
					return err
				}
			}
			return m.Send(ctx, 1, 9, Int64s(ints(200000, 5))) // several chunks
		}
		big := make([]int64, 200000)
		if src, err := m.Recv(ctx, 0, 9, Int64s(big)); err != nil || src != 0 {
			return errors.Join(err, errors.New("tag 9: wrong source"))
		}
		if !slices.Equal(big, ints(200000, 5)) {
			return errors.New("tag 9 payload differs")
		}
		for i := range k {
			got := make([]int64, 3)
			if _, err := m.Recv(ctx, 0, 7, Int64s(got)); err != nil {
				return err
			}
			if !slices.Equal(got, ints(3, int64(100*i))) {
				return errors.New("tag 7 messages out of order")
			}
		}
		return nil
	}))
}

func eachBox(boxes []*Mailbox, f func(r int, m *Mailbox) error) []error {
	return each(make([]*Comm, len(boxes)), func(r int, _ *Comm) error { return f(r, boxes[r]) })
}

// Two ranks that both send a large message before receiving do not
// deadlock: sends are eager.
func TestMailboxBothSendFirst(t *testing.T) {
	_, boxes := startMailboxes(t, 2, 0)
	ctx := testCtx(t)
	noErrors(t, eachBox(boxes, func(r int, m *Mailbox) error {
		if err := m.Send(ctx, 1-r, 0, Int64s(ints(1<<20, int64(r)))); err != nil {
			return err
		}
		got := make([]int64, 1<<20)
		if _, err := m.Recv(ctx, 1-r, 0, Int64s(got)); err != nil {
			return err
		}
		if !slices.Equal(got, ints(1<<20, int64(1-r))) {
			return errors.New("payload differs")
		}
		return nil
	}))
}

// A receive posted earlier is matched first: AnySource posted before a
// receive from rank 1 takes rank 1's first message. AnySource reports who
// sent.
func TestMailboxAnySourceAndPostOrder(t *testing.T) {
	_, boxes := startMailboxes(t, 3, 0)
	ctx := testCtx(t)
	posted, matched := make(chan struct{}), make(chan struct{})
	noErrors(t, eachBox(boxes, func(r int, m *Mailbox) error {
		switch r {
		case 1:
			<-posted
			if err := m.Send(ctx, 0, 4, Int64s([]int64{10})); err != nil {
				return err
			}
			return m.Send(ctx, 0, 4, Int64s([]int64{11}))
		case 2:
			<-matched
			return m.Send(ctx, 0, 4, Int64s([]int64{20}))
		}
		a, b, c := make([]int64, 1), make([]int64, 1), make([]int64, 1)
		any, err := m.Post(AnySource, 4, Int64s(a))
		if err != nil {
			return err
		}
		from1, err := m.Post(1, 4, Int64s(b))
		if err != nil {
			return err
		}
		close(posted)
		s1, err1 := any.Wait(ctx)
		s2, err2 := from1.Wait(ctx)
		close(matched)
		s3, err3 := m.Recv(ctx, AnySource, 4, Int64s(c))
		if err := errors.Join(err1, err2, err3); err != nil {
			return err
		}
		if s1 != 1 || a[0] != 10 || s2 != 1 || b[0] != 11 || s3 != 2 || c[0] != 20 {
			return fmt.Errorf("sources %d %d %d, payloads %d %d %d", s1, s2, s3, a[0], b[0], c[0])
		}
		return nil
	}))
}

// A message that does not fit its receive fails that receive only.
func TestMailboxSizeMismatchFailsOnlyTheReceive(t *testing.T) {
	comms, boxes := startMailboxes(t, 2, 0)
	ctx := testCtx(t)
	noErrors(t, eachBox(boxes, func(r int, m *Mailbox) error {
		if r == 0 {
			if err := m.Send(ctx, 1, 1, Int64s(ints(4, 0))); err != nil {
				return err
			}
			return m.Send(ctx, 1, 1, Int64s(ints(3, 0)))
		}
		_, err := m.Recv(ctx, 0, 1, Int64s(make([]int64, 3)))
		var e *Error
		if !errors.As(err, &e) || e.Kind != KindMismatch || e.Rank != 0 || !strings.Contains(err.Error(), "4 × int64") {
			return errors.Join(errors.New("want a mismatch naming rank 0"), err)
		}
		_, err = m.Recv(ctx, 0, 1, Int64s(make([]int64, 3)))
		return err
	}))
	noErrors(t, each(comms, func(r int, c *Comm) error { return c.Barrier(ctx) }))
}

// A receive that times out is withdrawn; the message that comes later goes
// to the next receive, and the communicator is unharmed.
func TestMailboxReceiveTimeoutLeavesCommUsable(t *testing.T) {
	comms, boxes := startMailboxes(t, 2, 0)
	ctx := testCtx(t)
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err := boxes[1].Recv(tctx, 0, 3, Int64s(make([]int64, 1)))
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindTimeout || e.Rank != 0 {
		t.Fatalf("timeout: %v", err)
	}
	noErrors(t, eachBox(boxes, func(r int, m *Mailbox) error {
		if r == 0 {
			return m.Send(ctx, 1, 3, Int64s([]int64{42}))
		}
		got := make([]int64, 1)
		if _, err := m.Recv(ctx, 0, 3, Int64s(got)); err != nil || got[0] != 42 {
			return errors.Join(err, errors.New("late message lost"))
		}
		return nil
	}))
	noErrors(t, each(comms, func(r int, c *Comm) error { return c.AllReduce(ctx, Float32s([]float32{1}), Sum) }))
}

// Many messages waiting unclaimed (more than the links' inbox holds, and
// past a tiny buffer limit) do not stall collectives on the same
// communicator beyond the limit's back-pressure: the receiver takes them
// all afterwards, in order.
func TestMailboxManyEarlyMessagesBesideCollectives(t *testing.T) {
	comms, boxes := startMailboxes(t, 2, 0)
	ctx := testCtx(t)
	const k = 100
	noErrors(t, eachBox(boxes, func(r int, m *Mailbox) error {
		if r == 0 {
			var sends []*Sending
			for i := range k {
				s, err := m.Start(1, 2, Int64s([]int64{int64(i)}))
				if err != nil {
					return err
				}
				sends = append(sends, s)
			}
			for _, s := range sends {
				if err := s.Wait(ctx); err != nil {
					return err
				}
			}
		}
		if err := comms[r].AllReduce(ctx, Float32s(make([]float32, 1000)), Sum); err != nil {
			return err
		}
		if r == 1 {
			for i := range k {
				got := make([]int64, 1)
				if _, err := m.Recv(ctx, 0, 2, Int64s(got)); err != nil {
					return err
				}
				if got[0] != int64(i) {
					return errors.New("out of order")
				}
			}
		}
		return nil
	}))
}

func TestMailboxBufferLimitBacksUpButLosesNothing(t *testing.T) {
	_, boxes := startMailboxes(t, 2, 64) // eight int64s
	ctx := testCtx(t)
	const k = 40
	noErrors(t, eachBox(boxes, func(r int, m *Mailbox) error {
		if r == 0 {
			var sends []*Sending
			for i := range k {
				s, err := m.Start(1, 0, Int64s(ints(4, int64(i))))
				if err != nil {
					return err
				}
				sends = append(sends, s)
			}
			for _, s := range sends {
				if err := s.Wait(ctx); err != nil {
					return err
				}
			}
			return nil
		}
		for i := range k {
			got := make([]int64, 4)
			if _, err := m.Recv(ctx, 0, 0, Int64s(got)); err != nil {
				return err
			}
			if !slices.Equal(got, ints(4, int64(i))) {
				return errors.New("out of order")
			}
		}
		return nil
	}))
}

// Plain contributions that arrive while a mailbox runs are kept for
// NextContribution.
func TestMailboxLeavesContributionsToNextContribution(t *testing.T) {
	comms, boxes := startMailboxes(t, 2, 0)
	ctx := testCtx(t)
	if err := comms[0].Contribute(ctx, 1, Float32s([]float32{3}), 5); err != nil {
		t.Fatal(err)
	}
	// A mailbox message sent after it on the same link: once it is
	// received, the mailbox has handled the contribution before it.
	if err := boxes[0].Send(ctx, 1, 0, Int64s(nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := boxes[1].Recv(ctx, 0, 0, Int64s(nil)); err != nil {
		t.Fatal(err)
	}
	ct, err := comms[1].NextContribution(ctx, []int{0})
	if err != nil {
		t.Fatal(err)
	}
	defer ct.Release()
	if ct.From != 0 || ct.Tag != 5 || ct.Data.Len() != 1 {
		t.Fatalf("contribution %+v", ct)
	}
}

func TestMailboxRejectsBadArgumentsAndClose(t *testing.T) {
	_, boxes := startMailboxes(t, 2, 0)
	m := boxes[0]
	for _, tc := range []struct {
		err  error
		want string
	}{
		{func() error { _, err := m.Start(0, 0, Int64s(nil)); return err }(), "not another rank"},
		{func() error { _, err := m.Start(2, 0, Int64s(nil)); return err }(), "not another rank"},
		{func() error { _, err := m.Post(1, MaxTag+1, Int64s(nil)); return err }(), "tag"},
		{func() error { _, err := m.Post(1, -1, Int64s(nil)); return err }(), "tag"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%v, want %q", tc.err, tc.want)
		}
	}
	r, err := m.Post(1, 0, Int64s(make([]int64, 1)))
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if _, err := r.Wait(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("posted receive after Close: %v", err)
	}
	if _, err := m.Start(1, 0, Int64s(nil)); !errors.Is(err, ErrClosed) {
		t.Fatalf("send after Close: %v", err)
	}
}

func TestMonitoredBarrierNamesMissingRanks(t *testing.T) {
	_, boxes := startMailboxes(t, 4, 0)
	ctx := testCtx(t)
	const timeout = 1500 * time.Millisecond
	// Everyone arrives (a long timeout: a loaded machine must not make
	// an arriving rank look missing).
	noErrors(t, eachBox(boxes, func(r int, m *Mailbox) error { return m.MonitoredBarrier(ctx, 20*time.Second, false) }))
	// Ranks 2 and 3 are late; with waitAll rank 0 names both, and the
	// ranks that arrived relay its verdict.
	released := make(chan struct{})
	errs := eachBox(boxes, func(r int, m *Mailbox) error {
		if r >= 2 {
			<-released
		}
		err := m.MonitoredBarrier(ctx, timeout, true)
		if r == 1 {
			close(released)
		}
		return err
	})
	for r, err := range errs {
		var me *MissingRanksError
		if !errors.As(err, &me) || !slices.Equal(me.Ranks, []int{2, 3}) {
			t.Fatalf("rank %d: %v, want ranks 2 and 3 missing", r, err)
		}
	}
	if !strings.Contains(errs[0].Error(), "Ranks 2, 3 failed to pass monitoredBarrier in 1500 ms") {
		t.Errorf("rank 0's message: %v", errs[0])
	}
	// Without waitAll only the first missing rank is named; the late
	// arrivals of the last barrier are recognised as stale.
	released = make(chan struct{})
	errs = eachBox(boxes, func(r int, m *Mailbox) error {
		if r >= 2 {
			<-released
		}
		err := m.MonitoredBarrier(ctx, timeout, false)
		if r == 1 {
			close(released)
		}
		return err
	})
	var me *MissingRanksError
	if !errors.As(errs[0], &me) || !slices.Equal(me.Ranks, []int{2}) {
		t.Fatalf("rank 0: %v, want rank 2 missing", errs[0])
	}
	// And then everyone arrives again: the barrier passes.
	noErrors(t, eachBox(boxes, func(r int, m *Mailbox) error { return m.MonitoredBarrier(ctx, 20*time.Second, false) }))
}

// ProcessGroupGloo's semantics and words: the ranks that arrived say so
// and relay rank 0's verdict; a zero timeout leaves rank 0 no time, and it
// says it timed out itself; the barrier then still works.
func TestMonitoredBarrierGlooWords(t *testing.T) {
	_, boxes := startMailboxes(t, 3, 0)
	ctx := testCtx(t)
	// Rank 2 is late: rank 0 names it, rank 1 says it arrived.
	released := make(chan struct{})
	errs := eachBox(boxes, func(r int, m *Mailbox) error {
		if r == 2 {
			<-released
		}
		err := m.MonitoredBarrier(ctx, 300*time.Millisecond, false)
		if r == 1 {
			close(released)
		}
		return err
	})
	if want := "Rank 2 failed to pass monitoredBarrier in 300 ms"; errs[0] == nil || !strings.Contains(errs[0].Error(), want) {
		t.Fatalf("rank 0: %v, want %q", errs[0], want)
	}
	want := "Rank 1 successfully reached monitoredBarrier, but received errors while waiting for send/recv from rank 0: " +
		"rank 0 reports: Rank 2 failed to pass monitoredBarrier in 300 ms"
	if errs[1] == nil || !strings.Contains(errs[1].Error(), want) {
		t.Fatalf("rank 1: %v, want %q", errs[1], want)
	}
	// A zero timeout: rank 0 has no time to wait for anyone.
	errs = eachBox(boxes, func(r int, m *Mailbox) error { return m.MonitoredBarrier(ctx, 0, false) })
	for r, err := range errs {
		var me *MissingRanksError
		if !errors.As(err, &me) || !me.Exhausted {
			t.Fatalf("rank %d: %v, want rank 0's timeout", r, err)
		}
		if want := "Rank 0 timed out in monitoredBarrier after 0 ms. No ranks successfully processed in monitoredBarrier."; !strings.Contains(err.Error(), want) {
			t.Fatalf("rank %d: %q lacks %q", r, err, want)
		}
	}
	if want := "Rank 1 successfully reached monitoredBarrier"; !strings.HasPrefix(errs[1].Error(), "ringtail: "+want) {
		t.Fatalf("rank 1: %q", errs[1])
	}
	noErrors(t, eachBox(boxes, func(r int, m *Mailbox) error { return m.MonitoredBarrier(ctx, 20*time.Second, false) }))
}

// Contributions and Mailbox messages share the links and tag values but
// never each other's takes: a NextContribution, a TakeContribution and a
// Mailbox receive all waiting before anything arrives each get their own
// message, whatever order they arrive in and whoever reads the links.
func TestMailboxAndContributionsDoNotStealEachOthersMessages(t *testing.T) {
	comms, boxes := startMailboxes(t, 3, 0)
	ctx := testCtx(t)
	type got struct {
		ct  *Contribution
		err error
	}
	next, take := make(chan got, 1), make(chan got, 1)
	// The two takes do not compete for one message (whichever of rank 0's
	// and rank 1's came first would go to a NextContribution over both,
	// leaving the other take waiting): each names its own sender.
	go func() { ct, err := comms[2].NextContribution(ctx, []int{0}); next <- got{ct, err} }()
	go func() { ct, err := comms[2].TakeContribution(ctx, 1, 7); take <- got{ct, err} }()
	recv := make([]int64, 2)
	r, err := boxes[2].Post(AnySource, 7, Int64s(recv))
	if err != nil {
		t.Fatal(err)
	}
	// Same tag everywhere; the Mailbox messages go first on each link.
	noErrors(t, each(comms[:2], func(rank int, c *Comm) error {
		if rank == 0 {
			if err := boxes[0].Send(ctx, 2, 7, Int64s([]int64{70, 71})); err != nil {
				return err
			}
			return c.Contribute(ctx, 2, Float32s([]float32{0.5}), 7)
		}
		if err := boxes[1].Send(ctx, 2, 7, Int64s([]int64{80, 81})); err != nil {
			return err
		}
		return c.Contribute(ctx, 2, Float32s([]float32{1.5}), 7)
	}))
	g1, g2 := <-next, <-take
	if g1.err != nil || g2.err != nil {
		t.Fatalf("NextContribution: %v, TakeContribution: %v", g1.err, g2.err)
	}
	defer g1.ct.Release()
	defer g2.ct.Release()
	cts := map[int]*Contribution{g1.ct.From: g1.ct, g2.ct.From: g2.ct}
	if g1.ct.From != 0 || g2.ct.From != 1 || len(cts) != 2 {
		t.Fatalf("contributions from %d (next) and %d (take), want 0 and 1", g1.ct.From, g2.ct.From)
	}
	for from, want := range map[int]float32{0: 0.5, 1: 1.5} {
		ct := cts[from]
		if ct.Tag != 7 || ct.Data.DType != Float32 || ct.Data.Len() != 1 || math.Float32frombits(binary.LittleEndian.Uint32(ct.Data.Bytes)) != want {
			t.Errorf("contribution from %d: tag %d, %d × %v, want tag 7 and [%v]", from, ct.Tag, ct.Data.Len(), ct.Data.DType, want)
		}
	}
	src, err := r.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second := make([]int64, 2)
	src2, err := boxes[2].Recv(ctx, 1-src, 7, Int64s(second))
	if err != nil {
		t.Fatal(err)
	}
	want := map[int][]int64{0: {70, 71}, 1: {80, 81}}
	if !slices.Equal(recv, want[src]) || !slices.Equal(second, want[src2]) {
		t.Fatalf("mailbox got %v from %d and %v from %d", recv, src, second, src2)
	}
	// Nothing is left over on either side.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if ct, err := comms[2].NextContribution(short, []int{0, 1}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a leftover contribution %+v (%v)", ct, err)
	}
}

// An AllReduceTree that collects every tag (mask 0) folds its child's
// contribution and not the Mailbox message the child sent before it.
func TestAllReduceTreeLeavesMailboxMessages(t *testing.T) {
	comms, boxes := startMailboxes(t, 3, 0)
	ctx := testCtx(t)
	if err := boxes[2].Send(ctx, 0, 3, Float32s([]float32{1000, 1000})); err != nil {
		t.Fatal(err)
	}
	if err := comms[2].Contribute(ctx, 0, Float32s([]float32{10, 20}), 3); err != nil {
		t.Fatal(err)
	}
	tree := Tree{Members: []int{0, 1}, Edges: []TreeEdge{{Child: 2, Parent: 0, Must: true}}}
	bufs := [][]float32{{1, 2}, {3, 4}}
	noErrors(t, each(comms[:2], func(r int, c *Comm) error {
		_, err := c.AllReduceTree(ctx, Float32s(bufs[r]), tree)
		return err
	}))
	for r := range bufs {
		if !slices.Equal(bufs[r], []float32{14, 26}) {
			t.Fatalf("rank %d: %v, want [14 26]", r, bufs[r])
		}
	}
	got := make([]float32, 2)
	if _, err := boxes[0].Recv(ctx, 2, 3, Float32s(got)); err != nil || !slices.Equal(got, []float32{1000, 1000}) {
		t.Fatalf("the mailbox message: %v, %v", got, err)
	}
}

// Contribution tags stop below bit 31 (the class bit): a larger one is a
// clear error that leaves the communicator usable.
func TestContributionTagAboveMaxIsRefused(t *testing.T) {
	comms := startComms(t, 2, nil)
	ctx := testCtx(t)
	if err := comms[0].Contribute(ctx, 1, Float32s([]float32{1}), MaxContributionTag+1); err == nil || !strings.Contains(err.Error(), "MaxContributionTag") {
		t.Fatalf("Contribute with tag 1<<31: %v", err)
	}
	if _, err := comms[1].TakeContribution(ctx, 0, 1<<31|5); err == nil || !strings.Contains(err.Error(), "MaxContributionTag") {
		t.Fatalf("TakeContribution with tag 1<<31|5: %v", err)
	}
	if err := comms[0].Contribute(ctx, 1, Float32s([]float32{1}), MaxContributionTag); err != nil {
		t.Fatal(err)
	}
	ct, err := comms[1].TakeContribution(ctx, 0, MaxContributionTag)
	if err != nil {
		t.Fatal(err)
	}
	ct.Release()
	noErrors(t, each(comms, func(r int, c *Comm) error { return c.Barrier(ctx) }))
}

// Many takers wait at once, each for its own sender, beside a running
// Mailbox: whichever of them reads a message off the links, the one that
// wants it gets it, and one sender's contributions come in order.
func TestConcurrentTakersEachGetTheirOwn(t *testing.T) {
	const n, k = 4, 200
	comms, boxes := startMailboxes(t, n, 0)
	ctx := testCtx(t)
	errs := each(comms, func(r int, c *Comm) error {
		if r < n-1 {
			for i := range k {
				if i%10 == 0 { // Mailbox messages in between, for the Mailbox's reader
					if err := boxes[r].Send(ctx, n-1, i, Int64s([]int64{int64(i)})); err != nil {
						return err
					}
				}
				if err := c.Contribute(ctx, n-1, Int64s([]int64{int64(r), int64(i)}), uint32(i)); err != nil {
					return err
				}
			}
			return nil
		}
		takers := make([]error, n-1)
		var wg sync.WaitGroup
		for from := range n - 1 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range k {
					var ct *Contribution
					var err error
					if i%2 == 0 {
						ct, err = c.NextContribution(ctx, []int{from})
					} else {
						ct, err = c.TakeContribution(ctx, from, uint32(i))
					}
					if err != nil {
						takers[from] = err
						return
					}
					v := []int64{int64(binary.LittleEndian.Uint64(ct.Data.Bytes)), int64(binary.LittleEndian.Uint64(ct.Data.Bytes[8:]))}
					ct.Release()
					if ct.From != from || ct.Tag != uint32(i) || v[0] != int64(from) || v[1] != int64(i) {
						takers[from] = fmt.Errorf("taker for %d, message %d: from %d tag %d payload %v", from, i, ct.From, ct.Tag, v)
						return
					}
				}
			}()
		}
		for from := range n - 1 {
			for i := 0; i < k; i += 10 {
				got := make([]int64, 1)
				if _, err := boxes[r].Recv(ctx, from, i, Int64s(got)); err != nil || got[0] != int64(i) {
					return errors.Join(err, fmt.Errorf("mailbox message %d from %d: %v", i, from, got))
				}
			}
		}
		wg.Wait()
		return errors.Join(takers...)
	})
	noErrors(t, errs)
}
