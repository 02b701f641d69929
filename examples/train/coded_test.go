package train

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/gradcode"
	"github.com/ringtail-ml/ringtail/straggler/inject"
)

// newCodedJob is newJob with every rank coding over its own Comm.
func newCodedJob(t testing.TB, world int, base Config, coding Coding, runner func(rank int) *inject.Runner) *job {
	t.Helper()
	comms := startComms(t, world)
	j := &job{}
	for r, c := range comms {
		cfg := base
		cfg.Comm = c
		cd := coding
		cd.Messenger = c
		cfg.Coded = &cd
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

// TestCodedStepAppliesTheWholeBatchGradient runs one coded step over 3
// ranks (s = 1, unequal throughputs, so ranks hold different numbers of
// partitions): the update is the mean gradient of every row of the batch,
// on every rank alike.
func TestCodedStepAppliesTheWholeBatchGradient(t *testing.T) {
	tr, te := split(t, 40)
	cfg := fastConfig(tr, te)
	cfg.Momentum, cfg.Batch, cfg.Epochs = 0, 40, 1 // one step of every row
	j := newCodedJob(t, 3, cfg, Coding{S: 1, Throughputs: []float64{1, 2, 3}, StepTimeout: time.Minute}, nil)
	ref, _ := NewMLP(j.trainers[0].Model().Sizes, cfg.Seed)
	initial := slices.Clone(ref.Params)
	full := make([]float32, ref.NumParams())
	all := make([]int, tr.Len())
	for i := range all {
		all[i] = i
	}
	ref.AccumulateGradient(tr, all, full)

	reps := j.mustRun(t)
	worst, scale := 0.0, 0.0
	for i, p := range j.trainers[0].Model().Params {
		g := (float64(initial[i]) - float64(p)) / cfg.LR
		want := float64(full[i]) / float64(len(all))
		worst = max(worst, math.Abs(g-want))
		scale = max(scale, math.Abs(want))
	}
	if scale == 0 || worst > 1e-4*scale {
		t.Fatalf("applied gradient differs from the full-batch mean by %g (largest component %g)", worst, scale)
	}
	for r, rep := range reps {
		if !rep.ParamsIdentical || rep.ParamsHash != reps[0].ParamsHash {
			t.Errorf("rank %d: params hash %s identical=%v, rank 0 %s", r, rep.ParamsHash, rep.ParamsIdentical, reps[0].ParamsHash)
		}
		if rep.Steps != 1 || rep.Epochs[0].Applied != tr.Len() || rep.Epochs[0].Modes["coded"] != 1 {
			t.Errorf("rank %d: %d steps, %d rows applied, modes %v", r, rep.Steps, rep.Epochs[0].Applied, rep.Epochs[0].Modes)
		}
	}
}

// blockedPad is a Runner sleep that never ends by itself: the rank's
// compute lasts until the step no longer needs it.
func blockedPad(ctx context.Context, _ time.Duration) error {
	<-ctx.Done()
	return ctx.Err()
}

// instantPad is a Runner sleep that returns at once.
func instantPad(context.Context, time.Duration) error { return nil }

// TestCodedJobTrainsWithoutARankThatNeverFinishes trains 4 ranks with
// s = 1 while rank 0 — the coder's leader — never finishes a step's
// compute: every step is decoded from the other three, the job ends with
// bit-identical parameters on every rank (the stopped rank's included)
// and reaches the accuracy plain synchronous SGD reaches.
func TestCodedJobTrainsWithoutARankThatNeverFinishes(t *testing.T) {
	tr, te := split(t, 0)
	cfg := fastConfig(tr, te)
	cfg.Epochs = 3
	bsp := newJob(t, 4, cfg, nil).mustRun(t)[0]

	cfg.StepCompute = time.Hour // never slept: padded by instantPad or blocked
	runner := func(r int) *inject.Runner {
		sleep := instantPad
		if r == 0 {
			sleep = blockedPad
		}
		run, err := inject.NewRunner(inject.RunnerConfig{Rank: r, Sleep: sleep})
		if err != nil {
			t.Fatal(err)
		}
		return run
	}
	j := newCodedJob(t, 4, cfg, Coding{S: 1, StepTimeout: time.Minute}, runner)
	reps := j.mustRun(t)
	for r, rep := range reps {
		if !rep.ParamsIdentical || rep.ParamsHash != reps[0].ParamsHash {
			t.Errorf("rank %d: params hash %s identical=%v, rank 0 %s", r, rep.ParamsHash, rep.ParamsIdentical, reps[0].ParamsHash)
		}
		if !slices.Equal(j.trainers[r].Model().Params, j.trainers[0].Model().Params) {
			t.Errorf("rank %d's parameters differ from rank 0's", r)
		}
		if want := cfg.Epochs * ((tr.Len() + cfg.Batch - 1) / cfg.Batch); rep.Steps != want {
			t.Errorf("rank %d ran %d steps, want %d", r, rep.Steps, want)
		}
	}
	if d := math.Abs(reps[0].TestAccuracy - bsp.TestAccuracy); d > 0.02 {
		t.Errorf("coded test accuracy %.2f%%, BSP %.2f%%", 100*reps[0].TestAccuracy, 100*bsp.TestAccuracy)
	}
}

// TestPartitionsCoverEveryRowOncePerEpoch checks the data layout: a rank
// holding every partition sees each row exactly once per epoch over the
// epoch's steps, the step row counts add up to the set, and a rank holding
// some partitions holds their rows and no others.
func TestPartitionsCoverEveryRowOncePerEpoch(t *testing.T) {
	tr, _ := split(t, 103)
	const k, steps = 7, 5
	every := []int{0, 1, 2, 3, 4, 5, 6}
	ps := newPartitions(tr, k, every, 1, steps)
	if ps.data.Len() != tr.Len() {
		t.Fatalf("holding every partition: %d rows, want %d", ps.data.Len(), tr.Len())
	}
	for epoch := 1; epoch <= 2; epoch++ {
		ps.shuffle(epoch)
		seen := make([]int, tr.Len())
		total := 0
		for j := range steps {
			got := 0
			for p := range k {
				for _, row := range ps.batch(p, j) {
					seen[row]++
					got++
				}
			}
			if got != ps.rows(j) {
				t.Errorf("epoch %d step %d: %d rows, rows() says %d", epoch, j, got, ps.rows(j))
			}
			total += got
		}
		if total != tr.Len() || slices.ContainsFunc(seen, func(c int) bool { return c != 1 }) {
			t.Fatalf("epoch %d: %d rows over the steps, counts %v", epoch, total, seen)
		}
	}
	some := newPartitions(tr, k, []int{2, 5}, 1, steps)
	if want := ps.sizes[2] + ps.sizes[5]; some.data.Len() != want {
		t.Errorf("holding partitions 2 and 5: %d rows, want %d", some.data.Len(), want)
	}
	some.shuffle(1)
	ps.shuffle(1)
	for _, p := range []int{2, 5} {
		for j := range steps {
			a, b := some.batch(p, j), ps.batch(p, j)
			for i := range a {
				if !slices.Equal(some.data.Row(a[i]), ps.data.Row(b[i])) || some.data.Y[a[i]] != ps.data.Y[b[i]] {
					t.Fatalf("partition %d step %d row %d differs between holders", p, j, i)
				}
			}
		}
	}
	if some.local[0] != nil || some.local[2] == nil {
		t.Error("a rank holds partitions it was not assigned, or lacks one it was")
	}
}

// TestCodingConfigErrors checks the coded job's own validation.
func TestCodingConfigErrors(t *testing.T) {
	tr, te := split(t, 40)
	cfg := fastConfig(tr, te)
	cfg.Comm = startComms(t, 1)[0]
	cfg.Coded = &Coding{S: -1, Scheme: gradcode.Cyclic}
	cfg.Sync = stragglerSync{}
	err := cfg.Validate()
	for _, want := range []string{"without a messenger", "not both", "tolerating -1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to say %q", err, want)
		}
	}
}
