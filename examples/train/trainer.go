package train

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/observe"
	"github.com/ringtail-ml/ringtail/straggler"
	"github.com/ringtail-ml/ringtail/straggler/driver"
	"github.com/ringtail-ml/ringtail/straggler/inject"
)

// Collective is the part of a ringtail communicator the trainer uses;
// *ringtail.Comm implements it.
type Collective interface {
	// Rank returns this rank.
	Rank() int
	// Size returns the world size.
	Size() int
	// AllReduce reduces buf element-wise across all ranks, in place, leaving
	// identical bits on every rank.
	AllReduce(ctx context.Context, buf ringtail.Buffer, op ringtail.Op) error
	// Broadcast copies root's buf to every rank's buf.
	Broadcast(ctx context.Context, buf ringtail.Buffer, root int) error
}

var _ Collective = (*ringtail.Comm)(nil)

// GradientSync replaces a step's gradient AllReduce when Config.Sync is
// set: cmd/ringtail-train's --mode adaptive plugs the straggler driver
// (straggler/driver) in through it, which may give ranks unequal shares of
// the global batch, overlap a late rank's reduction, or evict a slow rank
// into a parent: the evicted rank then computes at its own pace on the
// newest parameters its parent sent, and its gradients are folded into
// later steps. The trainer stays on the public API: it fills a buffer,
// applies the mean over the rows the sync says it holds, and computes the
// batch of the step the sync names.
type GradientSync interface {
	// Open is called once by Run with the length of the reduced buffer
	// (the gradient, then one slot for the loss sum) and returns the
	// buffer the trainer fills each step. Every rank calls it at the same
	// point (it may run a collective).
	Open(ctx context.Context, n int) ([]float32, error)
	// SetState registers the training state the sync may replace (the
	// parameters, then the optimizer's state): a rank computing at its own
	// pace gets its parameters from the others.
	SetState(parts ...[]float32)
	// Next returns the step whose batch this rank computes next.
	Next() int
	// Share returns this rank's rows [lo, hi) of a batch of the given
	// number of rows.
	Share(rows int) (lo, hi int)
	// Reduce sums the buffer over the job in place and returns the number
	// of rows whose gradients (and losses) it now holds (0 when this rank
	// computes at its own pace: it applies nothing), whether the state was
	// replaced, and whether training is over for this rank. compute is
	// this rank's compute time for its rows, arrival the time since the
	// step began.
	Reduce(ctx context.Context, rows int, compute, arrival time.Duration) (applied int, replaced, done bool, err error)
	// Outcome describes the last Reduce, for the epoch statistics.
	Outcome() SyncOutcome
	// Flush reduces the gradients still pending after the last step; the
	// trainer applies them as one more update when applied > 0.
	Flush(ctx context.Context) (applied int, err error)
}

// SyncOutcome is what a GradientSync did in one step.
type SyncOutcome struct {
	// Mode is the step's reduction mode (ring, overlap, evict); Child says
	// this rank computed at its own pace.
	Mode  string
	Child bool
	// Evicted are the ranks computing at their own pace in the step.
	Evicted []int
	// Folded is the rows of evicted ranks' gradients folded into the step,
	// Staleness their mean staleness in steps.
	Folded    int
	Staleness float64
	// Moved is the units of this rank's share it gave to helpers in the
	// step, Helped the units of others' it computed (Config.Reassign).
	Moved, Helped int
}

// ErrReplicasDiverged is returned by Run when the ranks' parameters are not
// bit-identical at the end of training: a bug in the job or the runtime.
var ErrReplicasDiverged = errors.New("train: replicas' parameters differ across ranks")

// Config configures a Trainer. Start from DefaultConfig and fill Comm,
// Train and Test.
type Config struct {
	// Comm connects this rank to the job; required. When it also records
	// progress (observe.ProgressRecorder; a *ringtail.Comm does), rank 0
	// reports each epoch's point to it: the dashboard's training curve.
	Comm Collective
	// Train and Test are the training and held-out sets; every rank must
	// hold the same ones (load with the same seed).
	Train, Test *Dataset
	// Hidden are the hidden layer widths; empty is softmax regression.
	Hidden []int
	// Epochs is the number of passes over the training set.
	Epochs int
	// Batch is the global batch size: each step, every rank takes a
	// disjoint slice (Shard) of the same Batch rows.
	Batch int
	// LR and Momentum configure SGD.
	LR, Momentum float64
	// Seed seeds the initial weights and each epoch's shuffle.
	Seed uint64
	// StepCompute pads each step's compute to this duration with a timer
	// sleep, standing for device work, and is the base the injector scales.
	// Zero runs at the speed of the CPU model.
	StepCompute time.Duration
	// Runner executes injected stragglers and faults for this rank; nil
	// pads to StepCompute and injects nothing.
	Runner *inject.Runner
	// Sync, when set, replaces the plain gradient AllReduce (see
	// GradientSync); nil runs plain synchronous SGD.
	Sync GradientSync
	// Reassign, when its UnitSize is > 0 and Sync can (Reassigning),
	// computes each step's batch in units that move, within the step,
	// from ranks behind to ranks ahead (FlexRR's in-step reassignment):
	// the update is synchronous SGD's. Steps whose plan has ranks outside
	// the reduction compute their shares as usual.
	Reassign straggler.ReassignConfig
	// Coded, when set, trains under gradient coding (see Coding) instead
	// of the plain AllReduce; it excludes Sync.
	Coded *Coding
	// EvalEvery, when > 0, makes rank 0 evaluate the held-out set every
	// EvalEvery steps (while it is a member) into Report.Curve, against
	// its training time with the evaluations taken out: the measure of
	// time to accuracy. The other ranks do not wait for it any longer
	// than the next step's reduction makes them.
	EvalEvery int
	// MicroCap is the largest micro-batch this rank computes at once (its
	// device's memory, AntDT-DD): a larger share is computed in
	// micro-batches whose gradients are summed before the reduction. Zero
	// computes the share in one pass. Ranks may differ.
	MicroCap int
	// Out receives rank 0's per-epoch lines; nil discards them.
	Out io.Writer
	// Logger receives structured logs; the zero value discards them.
	Logger zerolog.Logger
}

// DefaultConfig returns a Config with the job's defaults: an MLP 64→64→10,
// 10 epochs, global batch 64, SGD with learning rate 0.05 and momentum
// 0.9, seed 1, and 100 ms of (padded) compute per step.
func DefaultConfig() Config {
	return Config{
		Hidden: []int{64}, Epochs: 10, Batch: 64, LR: 0.05, Momentum: 0.9, Seed: 1,
		StepCompute: 100 * time.Millisecond, Logger: zerolog.Nop(),
	}
}

// Validate reports every invalid field.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Comm == nil {
		bad("no communicator")
	}
	if c.EvalEvery < 0 {
		bad("evaluation interval %d must not be negative", c.EvalEvery)
	}
	if c.Coded != nil {
		errs = append(errs, codingErrors(c.Coded, c.Sync)...)
	}
	if c.MicroCap < 0 {
		bad("micro-batch cap %d must not be negative", c.MicroCap)
	}
	errs = append(errs, jobErrors(c.Train, c.Test, c.Hidden, c.Epochs, c.Batch, c.LR, c.Momentum, c.StepCompute)...)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("train: invalid config: %w", err)
	}
	return nil
}

// jobErrors checks what a synchronous and an elastic job share: the data
// sets (present, valid, non-empty, of one shape), the model, the schedule
// and the optimizer.
func jobErrors(train, test *Dataset, hidden []int, epochs, batch int, lr, momentum float64, stepCompute time.Duration) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, set := range []struct {
		name string
		d    *Dataset
	}{{"training", train}, {"held-out", test}} {
		if set.d == nil {
			bad("no %s set", set.name)
		} else if err := set.d.Validate(); err != nil {
			bad("%s set: %w", set.name, err)
		} else if set.d.Len() == 0 {
			bad("%s set is empty", set.name)
		}
	}
	if train != nil && test != nil && (train.Features != test.Features || train.Classes != test.Classes) {
		bad("training set has %d features and %d classes but held-out set %d and %d",
			train.Features, train.Classes, test.Features, test.Classes)
	}
	for _, h := range hidden {
		if h < 1 {
			bad("hidden layer width %d must be ≥ 1", h)
		}
	}
	if epochs < 1 {
		bad("epochs %d must be ≥ 1", epochs)
	}
	if batch < 1 {
		bad("batch %d must be ≥ 1", batch)
	}
	if !(lr > 0) {
		bad("learning rate %v must be positive", lr)
	}
	if !(momentum >= 0 && momentum < 1) {
		bad("momentum %v must be in [0, 1)", momentum)
	}
	if stepCompute < 0 {
		bad("step compute %v must not be negative", stepCompute)
	}
	return errs
}

// curve records the held-out accuracy every EvalEvery steps on rank 0,
// and reports each point as progress (the dashboard's training curve)
// when progress is set.
type curve struct {
	every    int
	start    time.Time
	spent    time.Duration // evaluating, taken out of the training time
	points   []EvalPoint
	model    *MLP
	test     *Dataset
	evaluate bool
	progress observe.ProgressRecorder
}

// training is the training time so far: since start, evaluations taken
// out.
func (c *curve) training() time.Duration { return time.Since(c.start) - c.spent }

// after records the evaluation due after steps steps (of epoch), when the
// model holds every one of them (a member's view).
func (c *curve) after(steps, epoch int, member bool) {
	if !c.evaluate || c.every <= 0 || !member || steps%c.every != 0 {
		return
	}
	began := time.Now()
	loss, acc := c.model.Evaluate(c.test)
	training := began.Sub(c.start) - c.spent
	c.points = append(c.points, EvalPoint{Step: steps, Epoch: epoch, Seconds: training.Seconds(),
		TestLoss: loss, TestAccuracy: acc})
	c.spent += time.Since(began)
	if c.progress != nil {
		// Within an epoch: the epochs done are not whole (0: the epoch
		// lines' points say them); no training loss measured here.
		c.progress.RecordProgress(observe.Progress{Step: steps, Elapsed: training, Loss: math.NaN(), Accuracy: acc})
	}
}

// Trainer runs synchronous data-parallel SGD for one rank. Every rank of
// the job builds one with the same Config (but its own Comm and Runner)
// and calls Run.
type Trainer struct {
	cfg    Config
	rank   int
	world  int
	model  *MLP
	opt    *SGD
	runner *inject.Runner
	log    zerolog.Logger
	// grad holds the model's gradient followed by one slot for the loss
	// sum, so a step is a single AllReduce.
	grad  []float32
	curve *curve
	// steps counts the steps of the epochs ended, for the progress
	// reports.
	steps int
	// mem accumulates the per-rank statistics (accumulation.go).
	mem memoryStats
}

// progressOf is the recorder of rank 0's progress reports: comm, when it
// records progress (a *ringtail.Comm does); nil on the other ranks.
func progressOf(comm Collective, rank int) observe.ProgressRecorder {
	if p, ok := comm.(observe.ProgressRecorder); ok && rank == 0 {
		return p
	}
	return nil
}

// New validates cfg and builds the model (initialised from cfg.Seed; Run
// broadcasts rank 0's weights, so every rank starts identical whatever it
// holds before).
func New(cfg Config) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sizes := append(append([]int{cfg.Train.Features}, cfg.Hidden...), cfg.Train.Classes)
	model, err := NewMLP(sizes, cfg.Seed)
	if err != nil {
		return nil, err
	}
	opt, err := NewSGD(model.NumParams(), cfg.LR, cfg.Momentum)
	if err != nil {
		return nil, err
	}
	rank, world := cfg.Comm.Rank(), cfg.Comm.Size()
	runner := cfg.Runner
	if runner == nil {
		runner, err = inject.NewRunner(inject.RunnerConfig{Rank: rank, Logger: cfg.Logger})
		if err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
	}
	grad := make([]float32, model.NumParams()+1)
	return &Trainer{
		cfg: cfg, rank: rank, world: world, model: model, opt: opt, runner: runner,
		log:   cfg.Logger.With().Int("rank", rank).Logger(),
		grad:  grad,
		curve: &curve{every: cfg.EvalEvery, model: model, test: cfg.Test, evaluate: rank == 0, progress: progressOf(cfg.Comm, rank)},
	}, nil
}

// Model returns the model being trained (its Params are live).
func (t *Trainer) Model() *MLP { return t.model }

// Run broadcasts rank 0's parameters, trains cfg.Epochs epochs, evaluates
// the held-out set after each, and checks at the end that every rank holds
// bit-identical parameters. Rank 0 writes one line per epoch to cfg.Out.
// On error the Report holds the epochs completed so far.
func (t *Trainer) Run(ctx context.Context) (Report, error) {
	start := time.Now()
	rep := Report{
		Rank: t.rank, World: t.world, Params: t.model.NumParams(),
		TrainRows: t.cfg.Train.Len(), TestRows: t.cfg.Test.Len(), Batch: t.cfg.Batch,
		StepCompute: t.cfg.StepCompute,
	}
	if err := t.cfg.Comm.Broadcast(ctx, ringtail.Float32s(t.model.Params), 0); err != nil {
		return rep, fmt.Errorf("train: rank %d: broadcasting initial parameters: %w", t.rank, err)
	}
	t.opt.Reset()
	t.curve.start = time.Now()
	if t.cfg.Coded != nil {
		if err := t.runCoded(ctx, &rep); err != nil {
			rep.finish(time.Since(start))
			return rep, err
		}
	} else if t.cfg.Sync != nil {
		grad, err := t.cfg.Sync.Open(ctx, t.model.NumParams()+1)
		if err != nil {
			return rep, fmt.Errorf("train: rank %d: opening gradient sync: %w", t.rank, err)
		}
		if len(grad) != t.model.NumParams()+1 {
			return rep, fmt.Errorf("train: gradient sync buffer has %d elements, want %d", len(grad), t.model.NumParams()+1)
		}
		t.grad = grad
		t.cfg.Sync.SetState(t.model.Params, t.opt.velocity)
		if err := t.runSync(ctx, &rep); err != nil {
			rep.finish(time.Since(start))
			return rep, err
		}
	} else {
		step := 0
		for epoch := 1; epoch <= t.cfg.Epochs; epoch++ {
			es, err := t.epoch(ctx, epoch, &step)
			if err != nil {
				rep.finish(time.Since(start))
				return rep, err
			}
			if err := t.endEpoch(&rep, es); err != nil {
				rep.finish(time.Since(start))
				return rep, err
			}
		}
	}
	rep.Curve = t.curve.points
	ranks, err := t.gatherRanks(ctx)
	if err != nil {
		rep.finish(time.Since(start))
		return rep, err
	}
	rep.Ranks = ranks
	hash := paramsHash(t.model.Params)
	rep.ParamsHash = fmt.Sprintf("%016x", hash)
	identical, err := t.identical(ctx, hash)
	rep.ParamsIdentical = identical
	rep.finish(time.Since(start))
	if err != nil {
		return rep, fmt.Errorf("train: rank %d: comparing parameters: %w", t.rank, err)
	}
	if !identical {
		return rep, fmt.Errorf("train: rank %d (hash %s): %w", t.rank, rep.ParamsHash, ErrReplicasDiverged)
	}
	return rep, nil
}

// endEpoch evaluates the held-out set, records the epoch and prints its
// line on rank 0.
func (t *Trainer) endEpoch(rep *Report, es EpochStats) error {
	train := es.StepMean
	if es.Steps > 0 {
		es.SamplesPerSec = float64(es.Samples) / train.Seconds()
		if es.Applied > 0 {
			es.BatchTime = time.Duration(float64(train) * float64(t.cfg.Batch) / float64(es.Applied))
		}
		k := time.Duration(es.Steps)
		es.StepMean, es.ComputeMean, es.PadMean, es.CommMean = train/k, es.ComputeMean/k, es.PadMean/k, es.CommMean/k
	}
	if es.folded > 0 {
		es.Staleness = es.staleSum / float64(es.folded)
	}
	es.Loss = es.lossSum / float64(max(es.lossRows, 1))
	es.TestLoss, es.TestAccuracy = t.model.Evaluate(t.cfg.Test)
	rep.Epochs = append(rep.Epochs, es)
	t.log.Debug().Int("epoch", es.Epoch).Float64("loss", es.Loss).Float64("test_acc", es.TestAccuracy).
		Dur("step", es.StepMean).Msg("epoch done")
	if t.rank == 0 && t.cfg.Out != nil {
		if _, err := fmt.Fprintln(t.cfg.Out, es.String()); err != nil {
			return fmt.Errorf("train: writing epoch line: %w", err)
		}
	}
	t.steps += es.Steps
	if p := t.curve.progress; p != nil {
		p.RecordProgress(observe.Progress{Step: t.steps, Epoch: float64(es.Epoch), Elapsed: t.curve.training(),
			Loss: es.Loss, Accuracy: es.TestAccuracy, SamplesPerSec: es.SamplesPerSec, StepTime: es.StepMean})
	}
	return nil
}

// runSync trains under a GradientSync: the sync names the step each
// iteration computes (a rank computing at its own pace skips the steps it
// is behind), until every step of every epoch is done, then flushes.
func (t *Trainer) runSync(ctx context.Context, rep *Report) error {
	n := t.cfg.Train.Len()
	perEpoch := (n + t.cfg.Batch - 1) / t.cfg.Batch
	total := perEpoch * t.cfg.Epochs
	var es *EpochStats
	var order []int
	for {
		step := t.cfg.Sync.Next()
		if step >= total {
			break
		}
		epoch := step/perEpoch + 1
		if es == nil || es.Epoch != epoch {
			if es != nil {
				if err := t.endEpoch(rep, *es); err != nil {
					return err
				}
			}
			es = &EpochStats{Epoch: epoch}
			order = permutation(n, t.cfg.Seed, streamEpoch+uint64(epoch)<<8)
		}
		b := (step % perEpoch) * t.cfg.Batch
		batch := order[b:min(b+t.cfg.Batch, n)]
		st, err := t.step(ctx, step, batch)
		if err != nil {
			return err
		}
		es.add(st, len(batch))
		t.curve.after(step+1, epoch, !st.outcome.Child)
		if st.done {
			break
		}
	}
	if es != nil {
		if err := t.endEpoch(rep, *es); err != nil {
			return err
		}
	}
	return t.flush(ctx)
}

// epoch runs one pass over the training set in global batches of
// cfg.Batch, in an order every rank draws from the same seeded stream.
func (t *Trainer) epoch(ctx context.Context, epoch int, step *int) (EpochStats, error) {
	es := EpochStats{Epoch: epoch}
	n := t.cfg.Train.Len()
	order := permutation(n, t.cfg.Seed, streamEpoch+uint64(epoch)<<8)
	for b := 0; b < n; b += t.cfg.Batch {
		batch := order[b:min(b+t.cfg.Batch, n)]
		st, err := t.step(ctx, *step, batch)
		if err != nil {
			return es, err
		}
		*step++
		es.add(st, len(batch))
		t.curve.after(*step, epoch, true)
	}
	return es, nil
}

// Reassigning is a GradientSync that moves work between ranks within a
// step (driver.Sync): a step's compute then runs under Reassign, and its
// Samples go to Reduce.
type Reassigning interface {
	CanReassign() bool
	Reassign(ctx context.Context, in driver.ReassignInput) (driver.ReassignOutput, error)
}

// stepStats are one step's global loss sum (over applied rows) and
// timings.
type stepStats struct {
	loss                      float64
	applied                   int
	compute, pad, comm, total time.Duration
	done                      bool // training is over for this rank (sync)
	outcome                   SyncOutcome
}

// step computes this rank's shard of batch, pads the compute to the
// (injected) step duration, sums the shards' gradients and loss across
// ranks, and applies the mean over the whole global batch. Summing the
// per-row gradients and dividing by len(batch) — rather than averaging
// per-rank means — is exact when shards have unequal sizes.
func (t *Trainer) step(ctx context.Context, step int, batch []int) (stepStats, error) {
	var st stepStats
	begin := time.Now()
	lo, hi := Shard(len(batch), t.rank, t.world)
	base := t.cfg.StepCompute
	if t.cfg.Sync != nil {
		// An unequal share pads in proportion: StepCompute stands for
		// an equal share's device work.
		lo, hi = t.cfg.Sync.Share(len(batch))
		base = time.Duration(float64(t.cfg.StepCompute) * float64((hi-lo)*t.world) / float64(len(batch)))
	}
	if rs, ok := t.cfg.Sync.(Reassigning); ok && t.cfg.Reassign.UnitSize > 0 && rs.CanReassign() {
		return t.reassignStep(ctx, step, batch, base, rs)
	}
	np := t.model.NumParams()
	clear(t.grad)
	t.grad[np] = float32(t.computeShare(batch[lo:hi], t.grad[:np]))
	st.compute = time.Since(begin)
	if _, err := t.runner.Pad(ctx, step, base, st.compute); err != nil {
		return st, fmt.Errorf("train: rank %d step %d: %w", t.rank, step, err)
	}
	padded := time.Since(begin)
	st.pad = padded - st.compute
	st.applied = len(batch)
	if t.cfg.Sync != nil {
		applied, _, done, err := t.cfg.Sync.Reduce(ctx, hi-lo, padded, padded)
		if err != nil {
			return st, fmt.Errorf("train: rank %d step %d: gradient sync: %w", t.rank, step, err)
		}
		st.applied, st.done, st.outcome = applied, done, t.cfg.Sync.Outcome()
	} else if err := t.cfg.Comm.AllReduce(ctx, ringtail.Float32s(t.grad), ringtail.Sum); err != nil {
		return st, fmt.Errorf("train: rank %d step %d: gradient allreduce: %w", t.rank, step, err)
	}
	t.arrived(padded, hi-lo, st.outcome.Child)
	t.apply(&st, begin, padded)
	return st, nil
}

// apply ends a step whose reduced sums are in t.grad: it records the
// step's loss and times (padded: when the rank arrived at the reduction)
// and applies the mean gradient over the rows applied — nothing when
// every gradient of the step is late.
func (t *Trainer) apply(st *stepStats, begin time.Time, padded time.Duration) {
	np := t.model.NumParams()
	st.comm = time.Since(begin) - padded
	st.loss = float64(t.grad[np])
	if st.applied > 0 {
		inv := 1 / float32(st.applied)
		g := t.grad[:np]
		for i := range g {
			g[i] *= inv
		}
		t.opt.Step(t.model.Params, g)
	}
	st.total = time.Since(begin)
}

// reassignStep is step under in-step reassignment: the batch's units
// are computed by whichever rank the reassignment gives them to, each
// padded to its injected duration (the step's fixed delay first), and
// the sums reduced as usual. base is this rank's share's unslowed compute.
func (t *Trainer) reassignStep(ctx context.Context, step int, batch []int, base time.Duration, rs Reassigning) (stepStats, error) {
	var st stepStats
	begin := time.Now()
	delay, factor, err := t.runner.Begin(ctx, step, base)
	if err != nil {
		return st, fmt.Errorf("train: rank %d step %d: %w", t.rank, step, err)
	}
	np := t.model.NumParams()
	clear(t.grad)
	loss := 0.0
	// The units' padding keeps to the rows' running total, as Pad does
	// for a whole share: a unit whose real compute overran its time is
	// made up by the next ones' padding, not added to the step.
	perRow := float64(t.cfg.StepCompute) * float64(t.world) / float64(len(batch))
	var owed, busy time.Duration
	call := time.Now()
	out, err := rs.Reassign(ctx, driver.ReassignInput{Config: t.cfg.Reassign, Rows: len(batch), Expect: max(base, time.Millisecond), Delay: delay,
		Compute: func(ctx context.Context, u straggler.Unit) error {
			t0 := time.Now()
			loss += t.computeShare(batch[u.Lo:u.Hi], t.grad[:np])
			owed += time.Duration(factor * perRow * float64(u.Hi-u.Lo))
			err := t.runner.Sleep(ctx, owed-busy-time.Since(t0))
			busy += time.Since(t0)
			return err
		}})
	if err != nil {
		return st, fmt.Errorf("train: rank %d step %d: %w", t.rank, step, err)
	}
	t.grad[np] = float32(loss)
	st.compute = out.Compute
	// This rank's arrival: the end of its last unit. The wait for the
	// others' ends that Reassign made after it is the step's wait.
	padded := call.Sub(begin) + out.Elapsed
	applied, _, done, err := t.cfg.Sync.Reduce(ctx, out.Samples, out.Compute+delay, padded)
	if err != nil {
		return st, fmt.Errorf("train: rank %d step %d: gradient sync: %w", t.rank, step, err)
	}
	st.applied, st.done, st.outcome = applied, done, t.cfg.Sync.Outcome()
	st.outcome.Moved, st.outcome.Helped = out.Moved, out.Helped
	t.arrived(padded, out.Samples, false)
	t.apply(&st, begin, padded)
	return st, nil
}

// flush applies the gradients the sync still holds after the last step
// (a late rank's last gradient) as one more update.
func (t *Trainer) flush(ctx context.Context) error {
	clear(t.grad)
	applied, err := t.cfg.Sync.Flush(ctx)
	if err != nil {
		return fmt.Errorf("train: rank %d: flushing late gradients: %w", t.rank, err)
	}
	if applied > 0 {
		np := t.model.NumParams()
		inv := 1 / float32(applied)
		g := t.grad[:np]
		for i := range g {
			g[i] *= inv
		}
		t.opt.Step(t.model.Params, g)
	}
	return nil
}

// identical reports whether every rank's parameter hash equals this one's:
// one Max-AllReduce of (h, ^h) yields max(h) and ^min(h).
func (t *Trainer) identical(ctx context.Context, h uint64) (bool, error) {
	buf := []int64{int64(h), ^int64(h)}
	if err := t.cfg.Comm.AllReduce(ctx, ringtail.Int64s(buf), ringtail.Max); err != nil {
		return false, err
	}
	return buf[0] == ^buf[1], nil
}

// Describe is a one-line description of the run, for the job's header.
func (t *Trainer) Describe() string {
	sizes := make([]string, len(t.model.Sizes))
	for i, s := range t.model.Sizes {
		sizes[i] = strconv.Itoa(s)
	}
	return fmt.Sprintf("world %d  MLP %s (%d params)  train %d  test %d  batch %d (%d per rank)  lr %g  momentum %g  step-compute %v",
		t.world, strings.Join(sizes, "-"), t.model.NumParams(), t.cfg.Train.Len(), t.cfg.Test.Len(),
		t.cfg.Batch, (t.cfg.Batch+t.world-1)/t.world, t.cfg.LR, t.cfg.Momentum, t.cfg.StepCompute)
}
