package driver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/straggler"
)

// In-step reassignment on live communicators: every row of every step's
// batch is computed exactly once whichever rank computes it (each rank
// adds 1 at the rows it computes, and after the reduction every row is
// exactly 1 on every rank, whatever the timing), and a rank far behind
// the others gives units away: its units take 50 ms each (8 of them a
// step) while the others' take no time, so a helper idle for 350 ms of
// each step claims what it is offered; work must have moved in at least
// one of the four steps.
func TestReassignComputesEveryRowOnceAndMovesWorkFromTheSlowRank(t *testing.T) {
	const n, rows, steps, slow = 4, 64, 4, 2
	comms := startComms(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pol, err := straggler.Preset(straggler.NameBSP, n, rows)
	if err != nil {
		t.Fatal(err)
	}
	pol.Reassign, pol.ReassignAt = true, -1 // every step that can, whatever the predictions
	cfg := straggler.DefaultReassignConfig(2)
	type rankOut struct {
		sums [][]float32
		outs []ReassignOutput
	}
	got := make([]rankOut, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r := range n {
		wg.Go(func() {
			errs[r] = func() error {
				d, err := New(ctx, Config{Comm: comms[r], Payload: rows, Policy: pol, OpTimeout: time.Minute})
				if err != nil {
					return err
				}
				for s := range steps {
					if !d.CanReassign() {
						return fmt.Errorf("step %d: plan %s cannot reassign", s, d.Plan().Dump())
					}
					clear(d.Buffer())
					out, err := d.Reassign(ctx, ReassignInput{Config: cfg, Rows: rows, Expect: 10 * time.Millisecond,
						Compute: func(ctx context.Context, u straggler.Unit) error {
							for i := u.Lo; i < u.Hi; i++ {
								d.Buffer()[i]++
							}
							if r == slow {
								select {
								case <-time.After(50 * time.Millisecond): // its compute
								case <-ctx.Done():
									return ctx.Err()
								}
							}
							return nil
						}})
					if err != nil {
						return err
					}
					if _, err := d.Step(ctx, StepInput{Samples: out.Samples, Compute: out.Compute, Arrival: out.Elapsed}); err != nil {
						return err
					}
					got[r].sums = append(got[r].sums, slices.Clone(d.Buffer()))
					got[r].outs = append(got[r].outs, out)
				}
				_, err = d.Flush(ctx)
				return err
			}()
			if errs[r] != nil {
				cancel() // the others stop instead of waiting for this rank
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	moved := 0
	for s := range steps {
		samples, helped, gave := 0, 0, 0
		for r := range n {
			for i, v := range got[r].sums[s] {
				if v != 1 {
					t.Fatalf("step %d rank %d: row %d summed to %v, want exactly 1 (computed once)", s, r, i, v)
				}
			}
			o := got[r].outs[s]
			samples += o.Samples
			helped += o.Helped
			gave += o.Moved
		}
		if samples != rows || gave != helped {
			t.Fatalf("step %d: %d samples computed (want %d), %d units given, %d helped", s, samples, rows, gave, helped)
		}
		moved += got[slow].outs[s].Moved
	}
	if moved == 0 {
		t.Error("the slow rank gave no unit away in any step")
	}
}

// Bad input is refused, not run; a step whose plan does not reassign (the
// policy not told its caller can, or its predictions holding) is refused
// with ErrNotReassignable.
func TestReassignRefusesBadInput(t *testing.T) {
	for _, at := range []float64{0, -1} {
		comms := startComms(t, 1)
		pol, err := straggler.Preset(straggler.NameBSP, 1, 8)
		if err != nil {
			t.Fatal(err)
		}
		pol.Reassign, pol.ReassignAt = at != 0, at
		d, err := New(context.Background(), Config{Comm: comms[0], Payload: 8, Policy: pol})
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.Reassign(context.Background(), ReassignInput{Config: straggler.DefaultReassignConfig(1), Rows: 8, Expect: time.Millisecond})
		switch {
		case at == 0 && (d.CanReassign() || !errors.Is(err, ErrNotReassignable)):
			t.Fatalf("a policy not told its caller reassigns: CanReassign %v, %v, want ErrNotReassignable", d.CanReassign(), err)
		case at != 0 && !errors.Is(err, ErrInvalidConfig):
			t.Fatalf("no compute function: %v, want ErrInvalidConfig", err)
		}
	}
}

// The wire form round-trips every field, and malformed messages are
// refused, not misread.
func TestReassignMessagesRoundTrip(t *testing.T) {
	msgs := []straggler.ReassignMsg{
		{Kind: straggler.MsgProgress, From: 3, To: 1, Step: 1 << 40, Frac: 0.75, At: 123 * time.Millisecond, PerUnit: 7 * time.Microsecond},
		{Kind: straggler.MsgOffer, From: 1, To: 2, Step: 9, Offer: 4, Span: straggler.Span{Lo: 30, Hi: 32}},
		{Kind: straggler.MsgDone, From: 1, To: 2, Step: 9, Grants: []straggler.Grant{{Offer: 1, Span: straggler.Span{Lo: 3, Hi: 4}}, {Offer: 2, Span: straggler.Span{Lo: 1, Hi: 3}}}},
	}
	for _, m := range msgs {
		w := encodeReassign(m)
		b := ringtail.Int64s(w)
		back, err := decodeReassign(b.Bytes, b.DType)
		if err != nil {
			t.Fatal(err)
		}
		if back.String() != m.String() || back.Step != m.Step || back.At != m.At || back.PerUnit != m.PerUnit || back.Frac != m.Frac || !slices.Equal(back.Grants, m.Grants) {
			t.Fatalf("%+v came back as %+v", m, back)
		}
	}
	good := ringtail.Int64s(encodeReassign(msgs[2]))
	bad := map[string]ringtail.Buffer{
		"float32 words":   ringtail.Raw(good.Bytes, ringtail.Float32),
		"short":           ringtail.Raw(good.Bytes[:8*(reassignWords-1)], ringtail.Int64),
		"a cut grant":     ringtail.Raw(good.Bytes[:len(good.Bytes)-8], ringtail.Int64),
		"unknown kind":    ringtail.Int64s(append([]int64{99}, encodeReassign(msgs[0])[1:]...)),
		"grants on offer": ringtail.Int64s(append(encodeReassign(msgs[1]), 1, 2, 3)),
	}
	for name, b := range bad {
		if _, err := decodeReassign(b.Bytes, b.DType); !errors.Is(err, errBadReassign) {
			t.Errorf("%s: %v, want errBadReassign", name, err)
		}
	}
}
