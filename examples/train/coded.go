package train

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ringtail-ml/ringtail/gradcode"
	"github.com/ringtail-ml/ringtail/gradcode/coded"
)

// Coding configures a coded job (Config.Coded): gradient coding (Tandon et
// al.; the heterogeneity-aware scheme of gradcode) on the training path,
// each step run by gradcode/coded. The training set is cut into the plan's
// k partitions and each rank holds only the partitions the plan assigns it
// (every partition on s+1 ranks). A step is synchronous SGD's batch — the
// rows, in the order, a plain allreduce job takes (row indices are not
// data) — split by partition: each rank computes the gradient of the
// batch's rows in each of its partitions and sends its coded payload, and
// the step's gradient sum, the whole batch's, is decoded from the first
// n−s payloads (or the first whole group of the plan), so up to s ranks
// late — or stopped — do not delay it. Every rank applies the same decoded
// sum: synchronous SGD's update, up to the rounding of the sums, at (s+1)×
// the compute of an equal share.
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
// rank holds it: which partition every row is in (row indices are not
// data: every rank knows them) and the rows of its own partitions only.
type partitions struct {
	k    int
	part []int // partition of each training row
	// data holds this rank's partitions' rows and nothing else; local[i]
	// is training row i's index in data, −1 where this rank does not hold
	// its partition.
	data  *Dataset
	local []int
	// byPart[p] collects the current step's rows of partition p (in data).
	byPart [][]int
}

// newPartitions cuts train into k partitions — a seeded permutation of its
// rows in k contiguous near-equal runs (Shard), the same on every rank —
// and keeps the rows of the partitions held.
func newPartitions(train *Dataset, k int, held []int, seed uint64) *partitions {
	n := train.Len()
	perm := permutation(n, seed, streamPartition)
	ps := &partitions{k: k, part: make([]int, n), local: make([]int, n), byPart: make([][]int, k)}
	for p := range k {
		lo, hi := Shard(n, p, k)
		for _, i := range perm[lo:hi] {
			ps.part[i] = p
		}
	}
	var rows []int
	for i := range ps.local {
		ps.local[i] = -1
		if slices.Contains(held, ps.part[i]) {
			ps.local[i] = len(rows)
			rows = append(rows, i)
		}
	}
	ps.data = train.Subset(rows)
	return ps
}

// split sorts a step's batch (training rows) by partition: batch(p) then
// holds the rows of partition p this rank holds, as indices into data.
func (ps *partitions) split(batch []int) {
	for p := range ps.byPart {
		ps.byPart[p] = ps.byPart[p][:0]
	}
	for _, i := range batch {
		if l := ps.local[i]; l >= 0 {
			ps.byPart[ps.part[i]] = append(ps.byPart[ps.part[i]], l)
		}
	}
}

// batch returns the current step's rows of partition p (in data): empty
// when this rank does not hold p.
func (ps *partitions) batch(p int) []int { return ps.byPart[p] }

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
	ps := newPartitions(t.cfg.Train, plan.K, plan.Assignment[t.rank], t.cfg.Seed)
	t.log.Debug().Int("k", plan.K).Ints("partitions", plan.Assignment[t.rank]).Str("payload", string(plan.PayloadDType)).
		Msg("coded plan")
	sum := make([]float64, np+1)
	step := 0
	for epoch := 1; epoch <= t.cfg.Epochs; epoch++ {
		es := EpochStats{Epoch: epoch}
		// Synchronous SGD's batches, in its order: a step's gradient sum
		// is the one a plain allreduce would have summed.
		order := permutation(n, t.cfg.Seed, streamEpoch+uint64(epoch)<<8)
		for b := 0; b < n; b += t.cfg.Batch {
			batch := order[b:min(b+t.cfg.Batch, n)]
			ps.split(batch)
			st, err := t.codedStep(ctx, cd, ps, step, len(batch), sum)
			if err != nil {
				return err
			}
			step++
			es.add(st, len(batch))
			t.curve.after(step, epoch, true)
		}
		if err := t.endEpoch(rep, es); err != nil {
			return err
		}
	}
	return nil
}

// codedStep runs step, a batch of rows rows already split by partition:
// this rank computes its partitions' gradients and payload while the coder
// gathers the payloads, and every rank applies the decoded sum's mean over
// the step's rows.
func (t *Trainer) codedStep(ctx context.Context, cd *coded.Coder, ps *partitions, step, rows int, sum []float64) (stepStats, error) {
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
			loss := t.model.AccumulateGradient(ps.data, ps.batch(p), t.grad[:np])
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
	st.applied = rows
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
