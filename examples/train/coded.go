package train

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ringtail-ml/ringtail/gradcode"
	"github.com/ringtail-ml/ringtail/gradcode/coded"
)

// Coding configures a coded job (Config.Coded): gradient coding (Tandon et
// al.; the heterogeneity-aware scheme of gradcode) on the training path,
// each step run by gradcode/coded. The training set is cut into the plan's
// k partitions and each rank holds only the partitions the plan assigns it
// (every partition on s+1 ranks): a step takes its rows from every
// partition, each rank computes the gradients of its partitions' rows and
// sends its coded payload, and the step's gradient sum is decoded from the
// first n−s payloads (or the first whole group of the plan), so up to s
// ranks late — or stopped — do not delay it. Every rank applies the same
// decoded sum: synchronous SGD on a batch stratified over the partitions,
// at (s+1)× the compute of an equal share.
type Coding struct {
	// Messenger carries the payloads and sums; a *ringtail.Comm (usually
	// the Config's Comm) implements it.
	Messenger coded.Messenger
	// Scheme is the gradcode scheme ("" is gradcode.Hetero).
	Scheme gradcode.Scheme
	// S is the number of ranks a step tolerates late or stopped.
	S int
	// Throughputs are the ranks' predicted relative speeds the plan
	// allocates partitions by (faster ranks hold more); nil is equal.
	// Every rank must pass the same values.
	Throughputs []float64
	// StepTimeout bounds one coded step (0: coded's default, 30 s).
	StepTimeout time.Duration
}

// codingErrors checks a Coding beside the rest of the Config.
func codingErrors(c *Coding, sync GradientSync) []error {
	var errs []error
	if c.Messenger == nil {
		errs = append(errs, errors.New("coded job without a messenger"))
	}
	if sync != nil {
		errs = append(errs, errors.New("a coded job replaces the gradient sync: set Coded or Sync, not both"))
	}
	if c.S < 0 {
		errs = append(errs, fmt.Errorf("coded job tolerating %d stragglers: want ≥ 0", c.S))
	}
	if c.StepTimeout < 0 {
		errs = append(errs, fmt.Errorf("coded step timeout %v must not be negative", c.StepTimeout))
	}
	return errs
}

// partitions is the training set cut into a plan's k partitions, as one
// rank holds it: the sizes of every partition (each rank knows them, so
// each counts a step's rows alike) and the rows of its own partitions only.
type partitions struct {
	k     int
	sizes []int
	// data holds this rank's partitions' rows and nothing else; local[p]
	// are partition p's rows in data (nil where this rank does not hold
	// p) and order[p] the current epoch's order of them.
	data  *Dataset
	local [][]int
	order [][]int
	seed  uint64
	steps int // steps per epoch
}

// newPartitions cuts train into k partitions — a seeded permutation of its
// rows in k contiguous near-equal runs (Shard), the same on every rank —
// and keeps the rows of the partitions held; an epoch has steps steps.
func newPartitions(train *Dataset, k int, held []int, seed uint64, steps int) *partitions {
	n := train.Len()
	perm := permutation(n, seed, streamPartition)
	ps := &partitions{k: k, sizes: make([]int, k), local: make([][]int, k), order: make([][]int, k), seed: seed, steps: steps}
	var rows []int
	for p := range k {
		lo, hi := Shard(n, p, k)
		ps.sizes[p] = hi - lo
	}
	for _, p := range held {
		if ps.local[p] != nil || ps.sizes[p] == 0 {
			continue
		}
		lo, hi := Shard(n, p, k)
		ps.local[p] = make([]int, hi-lo)
		for i := range ps.local[p] {
			ps.local[p][i] = len(rows) + i
		}
		rows = append(rows, perm[lo:hi]...)
	}
	ps.data = train.Subset(rows)
	return ps
}

// shuffle draws epoch's order of every held partition's rows.
func (ps *partitions) shuffle(epoch int) {
	for p, loc := range ps.local {
		if loc == nil {
			continue
		}
		perm := permutation(len(loc), ps.seed, streamPartitionEpoch+uint64(epoch)<<8+uint64(p)<<32)
		ps.order[p] = ps.order[p][:0]
		for _, i := range perm {
			ps.order[p] = append(ps.order[p], loc[i])
		}
	}
}

// batch returns partition p's rows (in data) of step j of the epoch: the
// j-th of steps near-equal runs of its order.
func (ps *partitions) batch(p, j int) []int {
	lo, hi := Shard(len(ps.order[p]), j, ps.steps)
	return ps.order[p][lo:hi]
}

// rows returns the number of rows step j of an epoch takes over all k
// partitions (held or not).
func (ps *partitions) rows(j int) int {
	total := 0
	for _, size := range ps.sizes {
		lo, hi := Shard(size, j, ps.steps)
		total += hi - lo
	}
	return total
}

// runCoded trains every epoch under gradient coding (Config.Coded).
func (t *Trainer) runCoded(ctx context.Context, rep *Report) error {
	c := t.cfg.Coded
	scheme := c.Scheme
	if scheme == "" {
		scheme = gradcode.Hetero
	}
	var thr coded.ThroughputSource
	if c.Throughputs != nil {
		thr = coded.Static(c.Throughputs)
	}
	np := t.model.NumParams()
	cd, err := coded.New(c.Messenger, coded.Config{Scheme: scheme, S: c.S, Len: np + 1, Seed: int64(t.cfg.Seed),
		Throughputs: thr, StepTimeout: c.StepTimeout})
	if err != nil {
		return fmt.Errorf("train: rank %d: %w", t.rank, err)
	}
	defer cd.Close()
	plan := cd.Plan()
	n := t.cfg.Train.Len()
	perEpoch := (n + t.cfg.Batch - 1) / t.cfg.Batch
	ps := newPartitions(t.cfg.Train, plan.K, plan.Assignment[t.rank], t.cfg.Seed, perEpoch)
	t.log.Debug().Int("k", plan.K).Ints("partitions", plan.Assignment[t.rank]).Str("payload", string(plan.PayloadDType)).
		Msg("coded plan")
	sum := make([]float64, np+1)
	step := 0
	for epoch := 1; epoch <= t.cfg.Epochs; epoch++ {
		es := EpochStats{Epoch: epoch}
		ps.shuffle(epoch)
		for j := range perEpoch {
			st, err := t.codedStep(ctx, cd, ps, step, j, sum)
			if err != nil {
				return err
			}
			step++
			es.add(st, st.applied)
			t.curve.after(step, epoch, true)
		}
		if err := t.endEpoch(rep, es); err != nil {
			return err
		}
	}
	return nil
}

// codedStep runs step (the j-th of its epoch): this rank computes its
// partitions' gradients and payload while the coder gathers the payloads,
// and every rank applies the decoded sum's mean over the step's rows.
func (t *Trainer) codedStep(ctx context.Context, cd *coded.Coder, ps *partitions, step, j int, sum []float64) (stepStats, error) {
	st := stepStats{outcome: SyncOutcome{Mode: "coded"}}
	begin := time.Now()
	np := t.model.NumParams()
	// compute runs on the coder's goroutine while Step waits; Step returns
	// only after compute has, so t.grad, the model and the timings are
	// this goroutine's again when it does.
	compute := func(ctx context.Context, step, k int, parts []int, grads [][]float64) error {
		for i, p := range parts {
			if err := ctx.Err(); err != nil {
				return err
			}
			clear(t.grad)
			loss := t.model.AccumulateGradient(ps.data, ps.batch(p, j), t.grad[:np])
			for e, x := range t.grad[:np] {
				grads[i][e] = float64(x)
			}
			grads[i][np] = loss
		}
		st.compute = time.Since(begin)
		// The padding stands for device work in proportion to the rows:
		// len(parts) partitions of k, an equal share being world of k.
		base := time.Duration(float64(t.cfg.StepCompute) * float64(len(parts)*t.world) / float64(k))
		_, err := t.runner.Pad(ctx, step, base, st.compute)
		st.pad = time.Since(begin) - st.compute
		return err
	}
	_, err := cd.Step(ctx, compute, sum)
	if err != nil {
		return st, fmt.Errorf("train: rank %d step %d: coded step: %w", t.rank, step, err)
	}
	st.comm = max(time.Since(begin)-st.compute-st.pad, 0)
	st.applied = ps.rows(j)
	st.loss = sum[np]
	if st.applied > 0 {
		inv := 1 / float32(st.applied)
		g := t.grad[:np]
		for i := range g {
			g[i] = float32(sum[i]) * inv
		}
		t.opt.Step(t.model.Params, g)
	}
	st.total = time.Since(begin)
	return st, nil
}
