package train

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/elastic"
	"github.com/ringtail-ml/ringtail/elastic/shard"
	"github.com/ringtail-ml/ringtail/elastic/shard/service"
)

// ErrJobStateLost is returned by RunElastic when this process would start
// training from scratch although the job has trained shards already: every
// rank that held the model died, and a new generation of fresh processes
// would silently restart it. The process exits with elastic.ExitJobLost.
var ErrJobStateLost = errors.New("train: the job's model is lost (every rank that held it is gone)")

// ElasticConfig configures RunElastic: synchronous data-parallel SGD on a
// changing set of ranks (elastic.Worker), with the data handed out in
// shards by the shard service.
type ElasticConfig struct {
	// Member is this process's membership (elastic.ConfigFromEnv).
	Member elastic.Config
	// Shards reaches the shard service (Addr and Secret; RunElastic
	// declares the data in Job).
	Shards service.ClientConfig
	// Train and Test are the training and held-out sets; every rank must
	// hold the same ones (load with the same seed).
	Train, Test *Dataset
	// Hidden are the hidden layer widths; empty is softmax regression.
	Hidden []int
	// Epochs is the number of passes over the training set.
	Epochs int
	// Batch is the rows each rank trains per step: the global batch is
	// Batch times the ranks of the generation (Horovod's elastic rule:
	// fewer ranks, smaller global batches, more steps).
	Batch int
	// BatchesPerShard sets the shard size, Batch·BatchesPerShard samples
	// (AntDT's M).
	BatchesPerShard int
	// LR and Momentum configure SGD.
	LR, Momentum float64
	// Seed seeds the initial weights and the shard service's shuffles.
	Seed uint64
	// StepCompute pads a step of Batch rows to this duration (a timer
	// sleep standing for device work; fewer rows, proportionally less).
	StepCompute time.Duration
	// Out receives rank 0's lines (generations, epochs, the summary); nil
	// discards them.
	Out io.Writer
	// Logger receives structured logs; the zero value discards them.
	Logger zerolog.Logger
}

// Validate reports every invalid field (the membership's are checked by
// elastic.Join, the service client's by service.NewClient).
func (c *ElasticConfig) Validate() error {
	errs := jobErrors(c.Train, c.Test, c.Hidden, c.Epochs, c.Batch, c.LR, c.Momentum, c.StepCompute)
	if c.BatchesPerShard < 1 {
		errs = append(errs, fmt.Errorf("batches per shard %d must be ≥ 1", c.BatchesPerShard))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("train: invalid elastic config: %w", err)
	}
	return nil
}

// ShardConfig is the data the job declares to the shard service: the
// training set in shards of Batch·BatchesPerShard samples, shuffled per
// epoch with Seed.
func (c *ElasticConfig) ShardConfig() shard.Config {
	return shard.Config{Samples: int64(c.Train.Len()), ShardSize: int64(c.Batch * c.BatchesPerShard), Epochs: c.Epochs, Shuffle: true, Seed: c.Seed}
}

// ElasticReport is what RunElastic returns.
type ElasticReport struct {
	// Node is this process's node name; Rank and World its rank and the
	// size of the last generation it trained in, Generation that
	// generation's number, Generations how many it trained in.
	Node        string `json:"node"`
	Rank        int    `json:"rank"`
	World       int    `json:"world"`
	Generation  uint64 `json:"generation"`
	Generations int    `json:"generations"`
	// Steps is the job's committed steps at the end.
	Steps uint64 `json:"steps"`
	// Epochs and ShardsPerEpoch describe the data; ShardsDone counts the
	// shards this process reported DONE.
	Epochs         int   `json:"epochs"`
	ShardsPerEpoch int64 `json:"shards_per_epoch"`
	ShardsDone     int   `json:"shards_done"`
	// Params, TrainRows, TestRows and Batch (rows per rank per step)
	// describe the run.
	Params    int `json:"params"`
	TrainRows int `json:"train_rows"`
	TestRows  int `json:"test_rows"`
	Batch     int `json:"batch"`
	// TestAccuracy (0..1) and TestLoss are the held-out numbers at the end.
	TestAccuracy float64 `json:"test_accuracy"`
	TestLoss     float64 `json:"test_loss"`
	// Wall is the duration of RunElastic.
	Wall time.Duration `json:"wall_ns"`
	// ParamsHash is the FNV-1a hash of the final parameters' bits;
	// ParamsIdentical says every rank of the last generation ended with it.
	ParamsHash      string `json:"params_hash"`
	ParamsIdentical bool   `json:"params_identical"`
	// Finished is false for a process that started after the job's data
	// was all trained (it had nothing to do).
	Finished bool `json:"finished"`
}

// Summary is rank 0's last line.
func (r ElasticReport) Summary() string {
	s := fmt.Sprintf("done: generation %d (%d ranks)  %d epochs  %d steps  test-acc %.2f%%  wall %.1fs  params %s",
		r.Generation, r.World, r.Epochs, r.Steps, 100*r.TestAccuracy, r.Wall.Seconds(), r.ParamsHash)
	if r.ParamsIdentical {
		s += " (identical on all ranks)"
	}
	return s
}

// elasticRun is one RunElastic: owned by the goroutine running the step
// function.
type elasticRun struct {
	cfg   ElasticConfig
	model *MLP
	opt   *SGD
	feed  *feed
	stats func(context.Context) (shard.Stats, error)
	log   zerolog.Logger
	out   io.Writer
	rep   ElasticReport

	grad    []float32 // gradient, then loss sum, rows, busy flag
	state   []float32 // parameters then momentum, for the fresh broadcast
	started bool      // the first step call happened
	printed int       // epochs announced
	lossSum float64   // global loss and rows since the last epoch line
	rowSum  float64
}

// RunElastic trains until every shard of every epoch is DONE. It joins the
// job (elastic.Join: the start-up barrier, or a running job's next
// generation), and each step: takes rank 0's parameters and momentum at a
// fresh generation; trains up to Batch rows of the shard this rank holds
// (pulling one from the shard service when it holds none); all-reduces
// gradient, loss, row count and a "still busy" flag in one buffer; applies
// the mean over the step's rows. Batches become trained — and shards DONE
// — only once rank 0 has committed their step, so a generation change
// retrains exactly what was lost (at least once). The job stops when no
// rank is busy; the ranks then check their parameters are bit-identical.
//
// A process started after the data was all trained returns at once
// (Finished false). Run's membership errors come back as they are
// (elastic.ExitCode maps them to an exit status).
func RunElastic(ctx context.Context, cfg ElasticConfig) (ElasticReport, error) {
	start := time.Now()
	if err := cfg.Validate(); err != nil {
		return ElasticReport{}, err
	}
	sc := cfg.ShardConfig()
	if err := sc.Validate(); err != nil {
		return ElasticReport{}, fmt.Errorf("train: %w", err)
	}
	cfg.Shards.Job = &sc
	client, err := service.NewClient(cfg.Shards)
	if err != nil {
		return ElasticReport{}, fmt.Errorf("train: shard service: %w", err)
	}
	defer client.Close()
	sizes := append(append([]int{cfg.Train.Features}, cfg.Hidden...), cfg.Train.Classes)
	model, err := NewMLP(sizes, cfg.Seed)
	if err != nil {
		return ElasticReport{}, err
	}
	opt, err := NewSGD(model.NumParams(), cfg.LR, cfg.Momentum)
	if err != nil {
		return ElasticReport{}, err
	}
	r := &elasticRun{
		cfg: cfg, model: model, opt: opt, stats: client.Stats, log: cfg.Logger, out: cfg.Out,
		grad: make([]float32, model.NumParams()+3), state: make([]float32, 2*model.NumParams()),
	}
	if r.out == nil {
		r.out = io.Discard
	}
	r.rep = ElasticReport{Epochs: cfg.Epochs, ShardsPerEpoch: sc.NumShards(), Params: model.NumParams(),
		TrainRows: cfg.Train.Len(), TestRows: cfg.Test.Len(), Batch: cfg.Batch}
	// A replacement started after the last shard was trained has nothing
	// to do (and no job to join).
	if st, err := client.Stats(ctx); err == nil && st.Finished {
		r.rep.Wall = time.Since(start)
		return r.rep, nil
	}
	w, err := elastic.Join(ctx, cfg.Member)
	if err != nil {
		return r.rep, err
	}
	defer w.Close()
	r.rep.Node = w.Name()
	r.feed = &feed{src: client, worker: w.Name(), batch: cfg.Batch}
	err = w.Run(ctx, r.step)
	if err != nil {
		// Stopping (interrupted, or the job cannot go on): hand the shard
		// back so the others need not wait for the connection to close.
		if gerr := r.feed.giveBack(context.WithoutCancel(ctx)); gerr != nil {
			r.log.Warn().Err(gerr).Msg("train: handing the shard back")
		}
		r.rep.Wall = time.Since(start)
		return r.rep, err
	}
	r.rep.TestLoss, r.rep.TestAccuracy = model.Evaluate(cfg.Test)
	r.rep.ShardsDone = r.feed.done
	r.rep.Finished = true
	r.rep.Wall = time.Since(start)
	if r.rep.Rank == 0 {
		if _, err := fmt.Fprintln(r.out, r.rep.Summary()); err != nil {
			return r.rep, fmt.Errorf("train: writing the summary: %w", err)
		}
	}
	if !r.rep.ParamsIdentical {
		return r.rep, fmt.Errorf("train: %s (hash %s): %w", r.rep.Node, r.rep.ParamsHash, ErrReplicasDiverged)
	}
	return r.rep, nil
}

// step is the elastic.StepFunc: one synchronous SGD step on comm.
func (r *elasticRun) step(ctx context.Context, comm *ringtail.Comm, g elastic.Generation) error {
	np := r.model.NumParams()
	if g.Fresh {
		if err := r.fresh(ctx, comm, g); err != nil {
			return err
		}
	} else if err := r.feed.reportDone(ctx); err != nil {
		return err
	}
	b, rows, err := r.feed.next(ctx, g.Step)
	if err != nil {
		return err
	}
	begin := time.Now()
	clear(r.grad)
	r.grad[np] = float32(r.model.AccumulateGradient(r.cfg.Train, rows, r.grad[:np]))
	r.grad[np+1] = float32(len(rows))
	if r.feed.busy() || len(rows) > 0 {
		r.grad[np+2] = 1
	}
	pad := time.Duration(float64(r.cfg.StepCompute)*float64(len(rows))/float64(r.cfg.Batch)) - time.Since(begin)
	if err := ringtail.Sleep(ctx, pad); err != nil {
		return err
	}
	if err := comm.AllReduce(ctx, ringtail.Float32s(r.grad), ringtail.Sum); err != nil {
		return err // not committed here: the batch is trained again
	}
	if total := r.grad[np+1]; total > 0 { // row counts are exact in float32 up to 2^24
		mean := r.grad[:np]
		inv := 1 / total
		for i := range mean {
			mean[i] *= inv
		}
		r.opt.Step(r.model.Params, mean)
		r.lossSum += float64(r.grad[np])
		r.rowSum += float64(total)
	}
	if len(rows) > 0 {
		r.feed.trained(b)
	}
	// This step's all-reduce completed here, so rank 0 entered it: every
	// step before it is committed.
	if err := r.feed.commit(ctx, g.Step); err != nil {
		return err
	}
	r.rep.Steps = g.Step + 1
	if g.Rank == 0 && r.feed.epoch > r.printed {
		r.printed = r.feed.epoch
		tl, ta := r.model.Evaluate(r.cfg.Test)
		fmt.Fprintf(r.out, "epoch %d of %d done: step %d  loss %.4f  test-loss %.4f  test-acc %.2f%%  generation %d (%d ranks)\n",
			r.printed, r.cfg.Epochs, g.Step+1, r.lossSum/max(r.rowSum, 1), tl, 100*ta, g.Number, g.Size)
		r.lossSum, r.rowSum = 0, 0
	}
	if r.grad[np+2] > 0 {
		return nil
	}
	// No rank has data left: compare the parameters and stop.
	h := paramsHash(r.model.Params)
	buf := []int64{int64(h), ^int64(h)}
	if err := comm.AllReduce(ctx, ringtail.Int64s(buf), ringtail.Max); err != nil {
		return err
	}
	r.rep.ParamsHash = fmt.Sprintf("%016x", h)
	r.rep.ParamsIdentical = buf[0] == ^buf[1]
	r.rep.Steps = g.Step
	return elastic.ErrStop
}

// fresh starts a generation: the model and momentum become rank 0's, the
// batches rank 0 did not commit are rolled back, the ones it did are
// committed.
func (r *elasticRun) fresh(ctx context.Context, comm *ringtail.Comm, g elastic.Generation) error {
	np := r.model.NumParams()
	if !r.started {
		r.started = true
		// This process's first generation starts from step 0 although
		// the job has trained shards: the ranks that held the model are
		// all gone and this generation would start over.
		if g.Step == 0 {
			if st, err := r.stats(ctx); err == nil && st.DoneTotal > 0 {
				return fmt.Errorf("%w: %d shards were trained, but generation %d starts at step 0", ErrJobStateLost, st.DoneTotal, g.Number)
			}
		}
	}
	if g.Rank == 0 {
		copy(r.state, r.model.Params)
		copy(r.state[np:], r.opt.velocity)
	}
	if err := comm.Broadcast(ctx, ringtail.Float32s(r.state), 0); err != nil {
		return err
	}
	copy(r.model.Params, r.state[:np])
	copy(r.opt.velocity, r.state[np:])
	if g.Rejoined {
		r.feed.rollback(0) // nothing pending is known to be committed
	}
	r.feed.rollback(g.Step)
	if err := r.feed.commit(ctx, g.Step); err != nil {
		return err
	}
	r.rep.Rank, r.rep.World, r.rep.Generation = g.Rank, g.Size, g.Number
	r.rep.Generations++
	r.log.Info().Uint64("gen", g.Number).Int("rank", g.Rank).Int("size", g.Size).Uint64("step", g.Step).Msg("train: generation")
	if g.Rank == 0 {
		fmt.Fprintf(r.out, "generation %d: %d ranks, step %d\n", g.Number, g.Size, g.Step)
	}
	return nil
}

// ExitStatus maps RunElastic's error to the process's exit status: 0,
// elastic.ExitJobLost when the job cannot go on (its model is lost, or it
// stayed below min-np), 1 otherwise.
func ExitStatus(err error) int {
	if errors.Is(err, ErrJobStateLost) {
		return elastic.ExitJobLost
	}
	return elastic.ExitCode(err)
}
