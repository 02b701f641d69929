package elastic

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/elastic/view"
)

// Generation is what a step function knows about the communicator it runs
// on.
type Generation struct {
	// Number is the generation (ringtail.Config.Generation of the Comm).
	Number uint64
	// Rank and Size: this node's dense rank 0..Size−1.
	Rank, Size int
	// Members are the node names in rank order.
	Members []string
	// Step is the index of the step about to run: the number of steps
	// committed. At a generation change every rank adopts the new rank 0's
	// count, so all ranks run the same step.
	Step uint64
	// Fresh is set on the first call in a generation: the step function
	// must first make its state rank 0's (Broadcast from rank 0), because a
	// step that failed part-way may have committed on some ranks only.
	Fresh bool
	// Rejoined is set (with Fresh) when this node was not a member of the
	// generation rank 0 comes from (it joined, or was excluded for a while):
	// its own step count says nothing about what rank 0 committed, so all
	// of its uncommitted work must be redone.
	Rejoined bool
}

// StepFunc runs one training step on comm. It returns nil when the step is
// committed on this rank, ErrStop to end Run, a communicator error (or any
// error once ctx has ended) to have the step retried on the next
// generation, and any other error to stop Run with it.
type StepFunc func(ctx context.Context, comm *ringtail.Comm, gen Generation) error

// Run calls fn once per step until fn returns ErrStop (Run returns nil),
// ctx ends, fn returns an error of its own, or the node must stop
// (ErrBelowMinNP).
//
// When a collective fails — a peer died or froze, a peer closed its
// communicator because a newer view was adopted — or a newer view
// (a death the failure detector saw, a join) ends the
// generation's context, Run reports any dead rank named by the failure as
// evidence, closes the communicator, waits for the next generation that
// includes this node, forms it and calls fn again with Fresh set and Step
// set to the new rank 0's count. Every rank thus retries the in-flight
// step, or skips it if rank 0 had committed it, the same way.
func (w *Worker) Run(ctx context.Context, fn StepFunc) error {
	fresh := true
	defer w.stopStep()
	for {
		if w.comm == nil {
			if err := w.advance(ctx, w.gen.Number); err != nil {
				return err
			}
		}
		if w.stepCtx == nil {
			w.stepCtx, w.stepStop = mergeCtx(ctx, w.gctx)
			fresh = true
		}
		g := w.gen
		g.Step, g.Fresh = w.steps, fresh
		g.Rejoined = g.Rejoined && fresh
		err := fn(w.stepCtx, w.comm, g)
		switch {
		case err == nil:
			w.steps++
			fresh = false
			continue
		case errors.Is(err, ErrStop):
			return nil
		case ctx.Err() != nil:
			w.dropComm()
			return ctx.Err()
		}
		over := w.stepCtx.Err() != nil
		if cause := context.Cause(w.stepCtx); over && !errors.Is(cause, errSuperseded) {
			w.dropComm()
			return cause // below min-np, closed
		}
		if !over && !isCommFailure(err) {
			return err
		}
		if !over {
			w.reportFailure(err)
		}
		w.log.Info().Err(err).Uint64("gen", g.Number).Uint64("step", g.Step).Msg("elastic: step interrupted; re-forming")
		w.dropComm()
	}
}

// isCommFailure reports whether err comes from a failed communicator.
func isCommFailure(err error) bool {
	var e *ringtail.Error
	return errors.As(err, &e) || errors.Is(err, ringtail.ErrClosed)
}

// reportFailure tells the loop (and through it the generation's other
// members) that the communicator failed, naming the dead rank when the
// failure says a peer died or went silent: data-plane evidence the
// proposer acts on before the failure detector confirms.
func (w *Worker) reportFailure(err error) {
	blame := ""
	var e *ringtail.Error
	if errors.As(err, &e) && (e.Kind == ringtail.KindPeerDied || e.Kind == ringtail.KindSilent) &&
		e.Rank >= 0 && e.Rank < len(w.gen.Members) && e.Rank != w.gen.Rank {
		blame = w.gen.Members[e.Rank]
	}
	w.post(reportReq{gen: w.gen.Number, blame: blame})
}

func (w *Worker) stopStep() {
	if w.stepStop != nil {
		w.stepStop()
	}
	w.stepCtx, w.stepStop = nil, nil
}

// dropComm closes the current communicator.
func (w *Worker) dropComm() {
	w.stopStep()
	if w.comm != nil {
		w.comm.Close()
		w.comm = nil
	}
	w.curMu.Lock()
	w.curComm = nil
	w.curMu.Unlock()
}

// advance waits for a generation newer than after that includes this node
// and forms it, retrying on later generations while forming fails.
func (w *Worker) advance(ctx context.Context, after uint64) error {
	w.dropComm()
	for {
		v, gctx, err := w.await(ctx, after)
		if err != nil {
			return err
		}
		err = w.form(ctx, gctx, v)
		if err == nil {
			return nil
		}
		switch cause := context.Cause(gctx); {
		case ctx.Err() != nil:
			return fmt.Errorf("elastic: forming generation %d: %w", v.Gen, ctx.Err())
		case gctx.Err() != nil && !errors.Is(cause, errSuperseded):
			return cause
		case gctx.Err() == nil:
			w.log.Warn().Err(err).Uint64("gen", v.Gen).Msg("elastic: generation failed to form")
			w.post(reportReq{gen: v.Gen})
		}
		after = v.Gen
	}
}

func (w *Worker) await(ctx context.Context, after uint64) (view.View, context.Context, error) {
	reply := make(chan awaitResp, 1)
	if err := w.send(ctx, awaitReq{after: after, reply: reply}); err != nil {
		return view.View{}, nil, err
	}
	select {
	case r := <-reply:
		return r.v, r.ctx, r.err
	case <-ctx.Done():
		return view.View{}, nil, ctx.Err()
	case <-w.loopDone:
		return view.View{}, nil, ErrClosed
	}
}

// form builds v's communicator and checks agreement: one all-reduce (Max)
// of (digest, −digest, rank 0's step count, rank 0's previous generation)
// proves every rank holds the same view and hands every rank rank 0's
// count and lineage.
func (w *Worker) form(ctx context.Context, gctx context.Context, v view.View) error {
	fctx, stop := mergeCtx(ctx, gctx)
	rank := v.RankOf(w.name)
	cfg := w.cfg.Comm
	cfg.Rank, cfg.WorldSize, cfg.LocalRank, cfg.LocalWorldSize = rank, v.Size(), rank, v.Size()
	cfg.Generation = v.Gen
	cfg.JobID, cfg.Secret = w.cfg.JobID, w.cfg.Secret
	cfg.ExternalCoordinator = true
	// The proposer hosts internal/rendezvous on the libp2p control plane
	// (Noise to a coordinator identity derived from the job secret, and
	// the rendezvous's HMAC challenge–response inside).
	cfg.ControlPlane = "libp2p"
	host, port, err := net.SplitHostPort(v.Coord)
	if err != nil {
		stop()
		return fmt.Errorf("elastic: generation %d: coordinator %q: %w", v.Gen, v.Coord, err)
	}
	cfg.MasterAddr = host
	cfg.MasterPort, _ = strconv.Atoi(port)
	if cfg.ListenIP == "" {
		cfg.ListenIP = w.cfg.advertiseIP()
	}
	cfg.ConnectTimeout = w.cfg.FormTimeout
	comm, err := ringtail.New(fctx, cfg)
	if err != nil {
		stop()
		return fmt.Errorf("elastic: generation %d: %w", v.Gen, err)
	}
	dg := v.Digest()
	var steps, prev int64
	if rank == 0 {
		steps, prev = int64(w.steps), int64(w.gen.Number)
	}
	buf := []int64{dg, -dg, steps, prev}
	if err := comm.AllReduce(fctx, ringtail.Int64s(buf), ringtail.Max); err != nil {
		comm.Close()
		stop()
		return fmt.Errorf("elastic: generation %d agreement: %w", v.Gen, err)
	}
	if buf[0] != dg || buf[1] != -dg {
		comm.Close()
		stop()
		return fmt.Errorf("%w: generation %d", ErrViewMismatch, v.Gen)
	}
	stop()
	w.steps = uint64(buf[2])
	rejoined := uint64(buf[3]) != w.gen.Number
	w.comm, w.gctx = comm, gctx
	w.gen = Generation{Number: v.Gen, Rank: rank, Size: v.Size(), Members: slices.Clone(v.Members), Step: w.steps, Rejoined: rejoined}
	w.curMu.Lock()
	w.curComm = comm
	w.curMu.Unlock()
	w.post(formedReq{gen: v.Gen})
	w.log.Info().Uint64("gen", v.Gen).Int("rank", rank).Int("size", v.Size()).Uint64("step", w.steps).Msg("elastic: generation formed")
	return nil
}

// mergeCtx returns a context that ends when either ctx or other ends,
// with other's cause.
func mergeCtx(ctx, other context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(other, func() { cancel(context.Cause(other)) })
	return c, func() {
		stop()
		cancel(context.Canceled)
	}
}
