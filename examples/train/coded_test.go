package train

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/gradcode"
	"github.com/ringtail-ml/ringtail/straggler/inject"
)

// newCodedJob is newJob with every rank coding over its own Comm.
func newCodedJob(t testing.TB, world int, base Config, coding Coding, runner func(rank int) *inject.Runner) *job {
	t.Helper()
	return newJobWith(t, world, base, runner, func(cfg *Config, c *ringtail.Comm) {
		cd := coding
		cd.Messenger = c
		cfg.Coded = &cd
	})
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
	t.Logf("coded %.2f%%, BSP %.2f%%", 100*reps[0].TestAccuracy, 100*bsp.TestAccuracy)
	if d := math.Abs(reps[0].TestAccuracy - bsp.TestAccuracy); d > 0.01 {
		t.Errorf("coded test accuracy %.2f%%, BSP %.2f%%", 100*reps[0].TestAccuracy, 100*bsp.TestAccuracy)
	}
}

// TestPartitionsSplitABatchOnce checks the data layout: the k partitions
// cover the training set once, a batch split by a rank holding every
// partition is the batch (each row once, in its partition), and a rank
// holding some partitions holds their rows, and no others, with the same
// contents.
func TestPartitionsSplitABatchOnce(t *testing.T) {
	tr, _ := split(t, 103)
	const k = 7
	every := []int{0, 1, 2, 3, 4, 5, 6}
	all := newPartitions(tr, k, every, 1)
	if all.data.Len() != tr.Len() {
		t.Fatalf("holding every partition: %d rows, want %d", all.data.Len(), tr.Len())
	}
	sizes := make([]int, k)
	for _, p := range all.part {
		sizes[p]++
	}
	if slices.Min(sizes) < tr.Len()/k || slices.Max(sizes) > tr.Len()/k+1 {
		t.Errorf("partition sizes %v: want near-equal", sizes)
	}
	some := newPartitions(tr, k, []int{2, 5}, 1)
	if some.data.Len() != sizes[2]+sizes[5] {
		t.Errorf("holding partitions 2 and 5: %d rows, want %d", some.data.Len(), sizes[2]+sizes[5])
	}
	batch := permutation(tr.Len(), 9, 9)[:40]
	all.split(batch)
	some.split(batch)
	seen := map[int]int{}
	for p := range k {
		for _, l := range all.batch(p) {
			seen[l]++
		}
		if p != 2 && p != 5 && len(some.batch(p)) > 0 {
			t.Errorf("a rank holding 2 and 5 computes rows of partition %d", p)
		}
	}
	for _, i := range batch {
		l := all.local[i]
		if seen[all.local[i]] != 1 || !slices.Contains(all.batch(all.part[i]), l) {
			t.Fatalf("row %d appears %d times, or outside its partition %d", i, seen[l], all.part[i])
		}
		if p := all.part[i]; p == 2 || p == 5 {
			j := some.local[i]
			if !slices.Contains(some.batch(p), j) || !slices.Equal(some.data.Row(j), tr.Row(i)) || some.data.Y[j] != tr.Y[i] {
				t.Fatalf("row %d of partition %d differs, or is missing, on the rank holding it", i, p)
			}
		} else if some.local[i] != -1 {
			t.Fatalf("row %d of partition %d is held by a rank not assigned it", i, p)
		}
	}
	if len(seen) != len(batch) {
		t.Fatalf("the split holds %d rows, the batch %d", len(seen), len(batch))
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
