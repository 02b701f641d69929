package train

import (
	"bytes"
	"context"
	"errors"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/internal/commtest"
	"github.com/ringtail-ml/ringtail/observe"
	"github.com/ringtail-ml/ringtail/straggler/inject"
)

// startComms creates n communicators in this process over real sockets.
func startComms(t testing.TB, n int) []*ringtail.Comm {
	return commtest.Start(t, n, func(c *ringtail.Config) { c.OpTimeout = 30 * time.Second })
}

// split returns the digits' training and held-out sets (seed 1, 80/20),
// the training set cut to trainRows when that is positive.
func split(t testing.TB, trainRows int) (*Dataset, *Dataset) {
	t.Helper()
	tr, te, err := loadDigits(t).Split(0.2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if trainRows > 0 {
		idx := make([]int, trainRows)
		for i := range idx {
			idx[i] = i
		}
		tr = tr.Subset(idx)
	}
	return tr, te
}

// job is one in-process run: a Trainer per rank, built from base with the
// rank's Comm and an output buffer each.
type job struct {
	trainers []*Trainer
	out      []*bytes.Buffer
}

func newJob(t testing.TB, world int, base Config, runner func(rank int) *inject.Runner) *job {
	t.Helper()
	return newJobWith(t, world, base, runner, nil)
}

// newJobWith is newJob with each rank's Config finished by rankConfig
// (when not nil) from the rank's Comm after cfg.Comm is set.
func newJobWith(t testing.TB, world int, base Config, runner func(rank int) *inject.Runner, rankConfig func(cfg *Config, c *ringtail.Comm)) *job {
	t.Helper()
	comms := startComms(t, world)
	j := &job{}
	for r, c := range comms {
		cfg := base
		cfg.Comm = c
		if rankConfig != nil {
			rankConfig(&cfg, c)
		}
		j.out = append(j.out, &bytes.Buffer{})
		cfg.Out = j.out[r]
		if runner != nil {
			cfg.Runner = runner(r)
		}
		tr, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		j.trainers = append(j.trainers, tr)
	}
	return j
}

// run runs every rank concurrently and returns their reports and errors.
func (j *job) run(ctx context.Context) ([]Report, []error) {
	reps := make([]Report, len(j.trainers))
	errs := make([]error, len(j.trainers))
	var wg sync.WaitGroup
	for r, tr := range j.trainers {
		wg.Go(func() { reps[r], errs[r] = tr.Run(ctx) })
	}
	wg.Wait()
	return reps, errs
}

func (j *job) mustRun(t testing.TB) []Report {
	t.Helper()
	reps, errs := j.run(context.Background())
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return reps
}

func fastConfig(tr, te *Dataset) Config {
	c := DefaultConfig()
	c.Train, c.Test = tr, te
	c.StepCompute = 0
	return c
}

// TestFourRanksReachOneRankAccuracy is the acceptance test: 4 ranks
// over real sockets reach the 1-rank held-out accuracy within one point,
// and end with bit-identical parameters even though ranks 1..3 started
// from different weights (rank 0's are broadcast).
func TestFourRanksReachOneRankAccuracy(t *testing.T) {
	tr, te := split(t, 0)
	cfg := fastConfig(tr, te)
	cfg.Epochs = 6

	one := newJob(t, 1, cfg, nil).mustRun(t)[0]

	four := newJob(t, 4, cfg, nil)
	for r, trn := range four.trainers[1:] {
		for i := range trn.Model().Params {
			trn.Model().Params[i] += float32(r+1) * 0.01
		}
	}
	reps := four.mustRun(t)

	if one.TestAccuracy < 0.90 {
		t.Fatalf("1 rank reached only %.2f%% held-out accuracy", 100*one.TestAccuracy)
	}
	for r, rep := range reps {
		if d := math.Abs(rep.TestAccuracy - one.TestAccuracy); d > 0.01 {
			t.Errorf("rank %d of 4: test accuracy %.2f%%, 1 rank %.2f%%", r, 100*rep.TestAccuracy, 100*one.TestAccuracy)
		}
		if !rep.ParamsIdentical || rep.ParamsHash != reps[0].ParamsHash {
			t.Errorf("rank %d: params hash %s identical=%v, rank 0 %s", r, rep.ParamsHash, rep.ParamsIdentical, reps[0].ParamsHash)
		}
		if !slices.Equal(four.trainers[r].Model().Params, four.trainers[0].Model().Params) {
			t.Errorf("rank %d's parameters differ from rank 0's", r)
		}
		if rep.TestAccuracy != reps[0].TestAccuracy || rep.Epochs[0].Loss != reps[0].Epochs[0].Loss {
			t.Errorf("rank %d reports different numbers from rank 0", r)
		}
		if rep.Steps != cfg.Epochs*((tr.Len()+cfg.Batch-1)/cfg.Batch) {
			t.Errorf("rank %d ran %d steps", r, rep.Steps)
		}
	}
	if l0, ln := reps[0].Epochs[0].Loss, reps[0].Epochs[cfg.Epochs-1].Loss; !(ln < l0/2) {
		t.Errorf("training loss went from %v to %v", l0, ln)
	}

	line := regexp.MustCompile(`^epoch \d+  loss \d+\.\d{4}  test-acc \d+\.\d\d%  step \d+\.\dms  samples/s \d+$`)
	lines := strings.Split(strings.TrimSpace(four.out[0].String()), "\n")
	if len(lines) != cfg.Epochs {
		t.Fatalf("rank 0 printed %d lines, want %d:\n%s", len(lines), cfg.Epochs, four.out[0])
	}
	for _, l := range lines {
		if !line.MatchString(l) {
			t.Errorf("epoch line %q", l)
		}
	}
	for r, b := range four.out[1:] {
		if b.Len() != 0 {
			t.Errorf("rank %d printed %q", r+1, b)
		}
	}
}

// TestUnequalShardsGiveTheFullBatchGradient runs one step of a batch of 10
// rows over 3 ranks (shards of 4, 3 and 3) and checks the update equals the
// one computed from the whole batch on one model — which averaging the
// per-rank means would miss by far more than the tolerance.
func TestUnequalShardsGiveTheFullBatchGradient(t *testing.T) {
	tr, te := split(t, 40)
	cfg := fastConfig(tr, te)
	cfg.Momentum = 0
	j := newJob(t, 3, cfg, nil)
	batch := []int{3, 1, 4, 15, 9, 2, 6, 5, 35, 8}

	ref, _ := NewMLP(j.trainers[0].Model().Sizes, cfg.Seed)
	initial := slices.Clone(ref.Params)
	full := make([]float32, ref.NumParams())
	ref.AccumulateGradient(tr, batch, full)
	meanOfMeans := make([]float32, ref.NumParams())
	for r := range 3 {
		lo, hi := Shard(len(batch), r, 3)
		part := make([]float32, ref.NumParams())
		ref.AccumulateGradient(tr, batch[lo:hi], part)
		for i := range part {
			meanOfMeans[i] += part[i] / float32(hi-lo) / 3
		}
	}

	errs := make([]error, 3)
	var wg sync.WaitGroup
	for r, trn := range j.trainers {
		wg.Go(func() { _, errs[r] = trn.step(context.Background(), 0, batch) })
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	worstFull, worstNaive := 0.0, 0.0
	lr := float64(cfg.LR)
	for i, p := range j.trainers[0].Model().Params {
		g := (float64(initial[i]) - float64(p)) / lr // the gradient the step applied
		worstFull = max(worstFull, math.Abs(g-float64(full[i])/float64(len(batch))))
		worstNaive = max(worstNaive, math.Abs(g-float64(meanOfMeans[i])))
	}
	const tol = 1e-5
	if worstFull > tol {
		t.Fatalf("applied gradient differs from the full-batch mean by %g", worstFull)
	}
	if worstNaive < 10*tol {
		t.Fatalf("the batch does not tell weighted from naive averaging (naive differs by only %g)", worstNaive)
	}
	for r, trn := range j.trainers {
		if !slices.Equal(trn.Model().Params, j.trainers[0].Model().Params) {
			t.Fatalf("rank %d's parameters differ after the step", r)
		}
	}
}

// TestUnequalLastBatchTrainsLikeOneRank trains 3 ranks on 100 rows in
// batches of 32 (the last batch of 4 rows splits 2/1/1) and compares with
// one rank: only float rounding may differ.
func TestUnequalLastBatchTrainsLikeOneRank(t *testing.T) {
	tr, te := split(t, 100)
	cfg := fastConfig(tr, te)
	cfg.Batch, cfg.Epochs = 32, 3
	one := newJob(t, 1, cfg, nil)
	one.mustRun(t)
	three := newJob(t, 3, cfg, nil)
	reps := three.mustRun(t)
	worst := 0.0
	for i, p := range three.trainers[0].Model().Params {
		worst = max(worst, math.Abs(float64(p-one.trainers[0].Model().Params[i])))
	}
	if worst > 1e-4 {
		t.Fatalf("3-rank parameters differ from 1-rank ones by up to %g", worst)
	}
	if !reps[2].ParamsIdentical {
		t.Fatal("ranks diverged")
	}
}

// recordSleeps is a Runner whose padding sleeps are recorded, not slept.
type recordSleeps struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (s *recordSleeps) sleep(_ context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waits = append(s.waits, d)
	return nil
}

func TestInjectedSlowRankPadsToScaledStepCompute(t *testing.T) {
	tr, te := split(t, 128)
	cfg := fastConfig(tr, te)
	cfg.Epochs = 2
	cfg.StepCompute = time.Hour // recorded, never slept; no real compute comes near it
	spec, err := inject.Parse("slow=1:3x")
	if err != nil {
		t.Fatal(err)
	}
	in, err := inject.New(spec, 2)
	if err != nil {
		t.Fatal(err)
	}
	rec := []*recordSleeps{{}, {}}
	j := newJob(t, 2, cfg, func(r int) *inject.Runner {
		run, err := inject.NewRunner(inject.RunnerConfig{Injector: in, Rank: r, Sleep: rec[r].sleep})
		if err != nil {
			t.Fatal(err)
		}
		return run
	})
	reps := j.mustRun(t)
	for r, want := range []time.Duration{time.Hour, 3 * time.Hour} {
		// 128 rows in batches of 64: 2 steps per epoch.
		if len(rec[r].waits) != 4 {
			t.Fatalf("rank %d padded %d steps, want 4", r, len(rec[r].waits))
		}
		for e, es := range reps[r].Epochs {
			// Each pad is the step's target less its real compute.
			mean := (rec[r].waits[2*e] + rec[r].waits[2*e+1]) / 2
			if got := mean + es.ComputeMean; got < want-time.Microsecond || got > want+time.Microsecond {
				t.Errorf("rank %d epoch %d: pad %v + compute %v = %v, want %v", r, e+1, mean, es.ComputeMean, got, want)
			}
		}
	}
}

// TestSlowRankSetsTheStepTimeOfAll runs real sleeps: in synchronous SGD
// every rank's step lasts about as long as the slow rank's. Only lower
// bounds are checked (load can only lengthen steps); how a step splits into
// compute, pad and allreduce wait depends on how long the real compute
// took, so that split is checked exactly with recorded sleeps in
// TestInjectedSlowRankPadsToScaledStepCompute.
func TestSlowRankSetsTheStepTimeOfAll(t *testing.T) {
	tr, te := split(t, 128)
	cfg := fastConfig(tr, te)
	cfg.Epochs = 1
	cfg.StepCompute = 20 * time.Millisecond
	spec, _ := inject.Parse("slow=1:3x")
	in, err := inject.New(spec, 2)
	if err != nil {
		t.Fatal(err)
	}
	j := newJob(t, 2, cfg, func(r int) *inject.Runner {
		run, err := inject.NewRunner(inject.RunnerConfig{Injector: in, Rank: r})
		if err != nil {
			t.Fatal(err)
		}
		return run
	})
	reps := j.mustRun(t)
	// A step's wall time runs from the rank's own step start, and rank 0
	// starts its steps later than rank 1 by whatever it does between steps
	// (under load, several ms): its steps end with rank 1's but may be
	// that much shorter than 3 × 20ms. Twice its own compute still shows
	// that the slow rank set its pace.
	if rep := reps[0]; rep.StepMean < 40*time.Millisecond {
		t.Errorf("rank 0: mean step %v, want ≥ 2 × 20ms (the slow rank's 3 × 20ms, less the ranks' step-start skew)", rep.StepMean)
	}
	if rep := reps[1]; rep.StepMean < 60*time.Millisecond {
		t.Errorf("rank 1: mean step %v, want ≥ 3 × 20ms", rep.StepMean)
	}
	if slow := reps[1].Epochs[0]; slow.ComputeMean+slow.PadMean < 60*time.Millisecond-time.Microsecond {
		t.Errorf("rank 1 computed %v and padded %v per step, want them to reach 3 × 20ms", slow.ComputeMean, slow.PadMean)
	}
}

func TestKillFaultEndsTheRun(t *testing.T) {
	tr, te := split(t, 256)
	cfg := fastConfig(tr, te)
	spec, _ := inject.Parse("kill=0@5")
	in, err := inject.New(spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	code := -1
	j := newJob(t, 1, cfg, func(r int) *inject.Runner {
		run, err := inject.NewRunner(inject.RunnerConfig{Injector: in, Rank: r, Exit: func(c int) { code = c }})
		if err != nil {
			t.Fatal(err)
		}
		return run
	})
	reps, errs := j.run(context.Background())
	if !errors.Is(errs[0], inject.ErrKilled) || code != inject.ExitCodeKill {
		t.Fatalf("err %v, exit code %d", errs[0], code)
	}
	// 256 rows in batches of 64: epoch 1 is steps 0..3, the kill is step 5.
	if len(reps[0].Epochs) != 1 || reps[0].Steps != 4 {
		t.Fatalf("report has %d epochs and %d steps", len(reps[0].Epochs), reps[0].Steps)
	}
}

func TestFreezeFaultPausesTheRank(t *testing.T) {
	tr, te := split(t, 128)
	cfg := fastConfig(tr, te)
	cfg.Epochs = 1
	spec, _ := inject.Parse("freeze=0@1:150ms")
	in, err := inject.New(spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	j := newJob(t, 1, cfg, func(r int) *inject.Runner {
		run, err := inject.NewRunner(inject.RunnerConfig{Injector: in, Rank: r, Freeze: inject.FreezeSleep})
		if err != nil {
			t.Fatal(err)
		}
		return run
	})
	rep := j.mustRun(t)[0]
	if rep.Epochs[0].PadMean*time.Duration(rep.Steps) < 150*time.Millisecond {
		t.Fatalf("the freeze did not pause the step: pad %v over %d steps", rep.Epochs[0].PadMean, rep.Steps)
	}
}

func TestRunStopsWhenContextEnds(t *testing.T) {
	tr, te := split(t, 0)
	cfg := fastConfig(tr, te)
	cfg.StepCompute = time.Hour
	j := newJob(t, 2, cfg, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, errs := j.run(ctx)
	for r, err := range errs {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	// Each step computes for an hour: ending at all means the context
	// stopped it (a minute is the hang detector, not a speed limit).
	if d := time.Since(begin); d > time.Minute {
		t.Fatalf("run took %v: it waited out the step compute instead of stopping at its 200 ms deadline", d)
	}
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	c := DefaultConfig()
	c.Epochs, c.Batch, c.LR, c.Momentum, c.StepCompute, c.Hidden = 0, 0, 0, 1, -1, []int{0}
	err := c.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"communicator", "training set", "held-out set", "hidden", "epochs", "batch", "learning rate", "momentum", "step compute"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s: %v", want, err)
		}
	}
	tr, te := split(t, 10)
	good := fastConfig(tr, te)
	good.Comm = startComms(t, 1)[0]
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
}

// progressComm is a rank's Comm that keeps the progress reported to it.
type progressComm struct {
	*ringtail.Comm
	points []observe.Progress
}

func (p *progressComm) RecordProgress(pt observe.Progress) { p.points = append(p.points, pt) }

// Rank 0 reports one progress point per epoch — the numbers its epoch line
// prints — and one per evaluation of EvalEvery (the held-out accuracy) to
// a Comm that records progress; the other ranks report none.
func TestRankZeroReportsEachEpochsProgress(t *testing.T) {
	tr, te := split(t, 256)
	comms := startComms(t, 2)
	rec := []*progressComm{{Comm: comms[0]}, {Comm: comms[1]}}
	trainers := make([]*Trainer, 2)
	for r := range trainers {
		cfg := fastConfig(tr, te)
		cfg.Epochs, cfg.Comm, cfg.EvalEvery = 3, rec[r], 5
		var err error
		if trainers[r], err = New(cfg); err != nil {
			t.Fatal(err)
		}
	}
	reps := make([]Report, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r, trn := range trainers {
		wg.Go(func() { reps[r], errs[r] = trn.Run(context.Background()) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	var epochs, evals []observe.Progress
	for _, p := range rec[0].points {
		if p.Epoch > 0 {
			epochs = append(epochs, p)
		} else {
			evals = append(evals, p)
		}
	}
	if len(rec[1].points) != 0 || len(epochs) != 3 || len(evals) != len(reps[0].Curve) || len(evals) == 0 {
		t.Fatalf("rank 0 reported %d epoch and %d evaluation points (curve %d), rank 1 %d; want 3, the curve's and 0",
			len(epochs), len(evals), len(reps[0].Curve), len(rec[1].points))
	}
	for i, p := range evals {
		c := reps[0].Curve[i]
		if p.Step != c.Step || p.Accuracy != c.TestAccuracy || !math.IsNaN(p.Loss) || p.Elapsed.Seconds() != c.Seconds {
			t.Errorf("evaluation point %d: %+v, curve %+v", i, p, c)
		}
	}
	steps := 0
	for i, p := range epochs {
		e := reps[0].Epochs[i]
		steps += e.Steps
		if p.Epoch != float64(i+1) || p.Step != steps || p.Loss != e.Loss || p.Accuracy != e.TestAccuracy ||
			p.SamplesPerSec != e.SamplesPerSec || p.StepTime != e.StepMean || p.Elapsed <= 0 {
			t.Errorf("point %d: %+v, epoch %+v", i, p, e)
		}
		if i > 0 && p.Elapsed <= epochs[i-1].Elapsed {
			t.Errorf("point %d: elapsed %v not after %v", i, p.Elapsed, epochs[i-1].Elapsed)
		}
	}
}

// With EvalEvery, rank 0 records the held-out accuracy every few steps
// against its training time (what time to accuracy is read from): a point
// every EvalEvery steps, in order, time increasing, the last one the
// final model's accuracy.
func TestEvalEveryRecordsTheAccuracyCurveOnRankZero(t *testing.T) {
	tr, te := split(t, 320)
	cfg := fastConfig(tr, te)
	cfg.Epochs, cfg.Batch, cfg.EvalEvery = 2, 32, 3
	reps := newJob(t, 2, cfg, nil).mustRun(t)
	steps := 2 * 320 / 32
	if len(reps[1].Curve) != 0 {
		t.Fatalf("rank 1 recorded %d points; only rank 0 evaluates", len(reps[1].Curve))
	}
	c := reps[0].Curve
	if len(c) != steps/3 {
		t.Fatalf("%d points over %d steps, want one every 3: %+v", len(c), steps, c)
	}
	for i, p := range c {
		if p.Step != 3*(i+1) || p.Epoch != (p.Step-1)/(320/32)+1 || !(p.TestAccuracy >= 0 && p.TestAccuracy <= 1) ||
			(i > 0 && p.Seconds < c[i-1].Seconds) {
			t.Fatalf("point %d: %+v (previous %+v)", i, p, c[max(0, i-1)])
		}
	}
	if reps[0].Steps != steps {
		t.Fatalf("%d steps, want %d", reps[0].Steps, steps)
	}
}
