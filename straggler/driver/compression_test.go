package driver

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/internal/commtest"
	"github.com/ringtail-ml/ringtail/straggler"
	"github.com/ringtail-ml/ringtail/topology"
	"github.com/rs/zerolog"
)

// sparseFill writes the gradient of samples samples: nine elements in ten
// zero (dead units, scattered by a hash of the index), the others
// samples·k(i) with k(i) in 1..7 — integers, so that every sum of them is
// exact in float32 whatever the order (see sparseWant).
func sparseFill(buf []float32, samples int) {
	for i := range buf {
		buf[i] = float32(samples * sparseUnit(i))
	}
}

// sparseUnit is element i of the gradient of one sample: 0 for nine in ten.
func sparseUnit(i int) int {
	h := uint32(i) * 2654435761
	if (h>>8)%10 != 0 {
		return 0
	}
	return int(h>>24)%7 + 1
}

// A child on a (modelled) slow link sends its sparse gradients compressed,
// and every member's payload is bit for bit the exact sum of the gradients
// it says it applied, the children's folded ones included; no sample is
// lost over the run.
func TestASparseGradientOnASlowLinkTravelsCompressedAndFoldsExactly(t *testing.T) {
	const n, steps, payload = 4, 16, 16 << 10
	comms := startComms(t, n)
	pol, err := straggler.Preset(straggler.NameSTAR, n, 32)
	if err != nil {
		t.Fatal(err)
	}
	// Rank 2 is 3× slow and sits behind a 1 MB/s link (modelled: the
	// decision reads the matrix, the sockets are local).
	pol.Bandwidth = topology.NewMatrix(n)
	for a := range n {
		for b := range n {
			pol.Bandwidth[a][b] = 1e9
			if a == 2 || b == 2 {
				pol.Bandwidth[a][b] = 1e6
			}
		}
	}
	type rankOut struct {
		computed, applied, folded int
		childSteps, compressed    int
		wire                      WireStats
	}
	outs := make([]rankOut, n)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	commtest.NoErrors(t, commtest.Each(n, func(r int) error {
		d, err := New(ctx, Config{Comm: comms[r], Payload: payload, Policy: pol, OpTimeout: 30 * time.Second})
		if err != nil {
			return err
		}
		params := make([]float32, 4)
		d.SetState(params)
		out := &outs[r]
		check := func(res Result) {
			for i, v := range d.Buffer() {
				if want := float32(res.Applied * sparseUnit(i)); v != want {
					t.Errorf("rank %d step %d: payload[%d] = %v, want %v (%d samples applied, %d gradients folded)", r, res.Step, i, v, want, res.Applied, res.Folded)
					return
				}
			}
		}
		for i := 0; ; i++ {
			if d.Role() != straggler.RoleChild && d.Plan().Step >= steps {
				break
			}
			samples := d.Plan().Shares[r]
			tau := 2 * time.Millisecond
			if r == 2 {
				tau *= 3
			}
			if err := ringtail.Sleep(ctx, time.Duration(samples)*tau); err != nil {
				return err
			}
			sparseFill(d.Buffer(), samples)
			out.computed += samples
			res, err := d.Step(ctx, StepInput{Samples: samples, Compute: time.Duration(samples) * tau})
			if err != nil {
				return err
			}
			if res.Role == straggler.RoleChild {
				out.childSteps++
				out.wire = res.Wire
				if res.Wire.Compressed {
					out.compressed++
				}
				if res.Done {
					break
				}
				continue
			}
			if res.Wire.Compressed || res.Wire.CompressedPosts != 0 {
				t.Errorf("rank %d member step %d reports compression: %+v", r, res.Step, res.Wire)
			}
			out.applied += res.Applied
			out.folded += res.Folded
			check(res)
		}
		f, err := d.Flush(ctx)
		if err != nil {
			return err
		}
		if r == 0 {
			out.applied += f.Applied
		}
		check(f)
		return nil
	}))
	computed := 0
	for _, o := range outs {
		computed += o.computed
	}
	w := outs[2].wire
	t.Logf("rank 2: %d child steps, %d sent compressed; %d compressed sends, %d → %d bytes (ratio %.3f, encode %.0f MB/s); members folded %d gradients",
		outs[2].childSteps, outs[2].compressed, w.CompressedPosts, w.PlainBytes, w.WireBytes, w.Ratio, w.EncodeRate/1e6, outs[0].folded)
	if outs[0].applied != computed {
		t.Fatalf("applied %d samples over the run, computed %d: gradients lost or folded twice", outs[0].applied, computed)
	}
	if outs[2].childSteps == 0 || outs[0].folded == 0 {
		t.Fatalf("rank 2 (3× slow) was never a child whose gradient was folded: %d child steps, %d folded", outs[2].childSteps, outs[0].folded)
	}
	if outs[2].compressed != outs[2].childSteps || w.CompressedPosts == 0 || w.WireBytes*3 > w.PlainBytes || w.Bandwidth != 1e6 {
		t.Fatalf("rank 2's sparse gradients on a 1 MB/s link: %d of %d sent compressed, %+v", outs[2].compressed, outs[2].childSteps, w)
	}
}

// Over real sockets: a child's dense gradients are measured once and then
// sent plain (the decision declines; every SampleEvery-th is measured
// again), sparse ones are compressed every time; the parent receives
// exactly what was sent either way.
func TestGradientWireDeclinesDenseAndCompressesSparse(t *testing.T) {
	comms := startComms(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rng := rand.New(rand.NewPCG(7, 8))
	const elems, posts, bw = 64 << 10, 10, 1e6
	dense := make([]float32, elems)
	for i := range dense {
		dense[i] = float32(rng.NormFloat64())
	}
	sparse := make([]float32, elems)
	sparseFill(sparse, 3)
	for _, c := range []struct {
		name string
		grad []float32
		want func(i int) (compressed, sampled bool)
	}{
		{"dense", dense, func(i int) (bool, bool) {
			s := i%straggler.DefaultCompressionSampleEvery == 0
			return s, s
		}},
		{"sparse", sparse, func(i int) (bool, bool) { return true, i == 0 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var g gradientWire
			for i := range posts {
				p, err := g.post(ctx, comms[1], 0, bw, c.grad, tag(kindGradient, i), zerolog.Nop())
				if err != nil {
					t.Fatal(err)
				}
				if comp, samp := c.want(i); g.stats.Compressed != comp || g.stats.Sampled != samp {
					t.Fatalf("post %d: compressed %v sampled %v, want %v %v (ratio %v)", i, g.stats.Compressed, g.stats.Sampled, comp, samp, g.stats.Ratio)
				}
				got, err := comms[0].TakeContribution(ctx, 1, tag(kindGradient, i))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.Data.Bytes, ringtail.Float32s(c.grad).Bytes) {
					t.Fatalf("post %d: the parent got different bytes", i)
				}
				got.Release()
				if err := p.Wait(ctx); err != nil {
					t.Fatal(err)
				}
			}
			g.reap(zerolog.Nop())
			w := g.stats
			t.Logf("%s: %+v", c.name, w)
			switch c.name {
			case "dense":
				if w.CompressedPosts != 2 || w.Ratio != 1 || w.WireBytes != w.PlainBytes {
					t.Fatalf("dense: %+v", w)
				}
			case "sparse":
				if w.CompressedPosts != posts || w.Ratio > 0.35 {
					t.Fatalf("sparse: %+v", w)
				}
			}
		})
	}
}
