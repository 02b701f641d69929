package driver

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/examples/train"
	"github.com/ringtail-ml/ringtail/straggler/driver/policy"
	"github.com/ringtail-ml/ringtail/straggler/inject"
)

var _ train.GradientSync = (*Sync)(nil)

// The digits job with --mode adaptive, in process: 4 ranks, rank 2 3×
// slow. Every rank must end with bit-identical parameters (Run checks), the
// model must learn, and the slow rank must be given fewer rows.
func TestTrainerWithTheDriverStaysIdenticalAndLearns(t *testing.T) {
	const n = 4
	all, err := train.LoadDigits("")
	if err != nil {
		t.Fatal(err)
	}
	trainSet, testSet, err := all.Split(0.2, 1)
	if err != nil {
		t.Fatal(err)
	}
	comms := startComms(t, n)
	spec, err := inject.Parse("slow=2:3x")
	if err != nil {
		t.Fatal(err)
	}
	in, err := inject.New(spec, n)
	if err != nil {
		t.Fatal(err)
	}
	reps := make([]train.Report, n)
	syncs := make([]*Sync, n)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	noErrors(t, each(n, func(r int) error {
		runner, err := inject.NewRunner(inject.RunnerConfig{Injector: in, Rank: r, Logger: zerolog.Nop()})
		if err != nil {
			return err
		}
		pol, err := policy.Preset(policy.NameShares, n, 64)
		if err != nil {
			return err
		}
		syncs[r] = NewSync(comms[r], pol, zerolog.Nop())
		defer syncs[r].Close()
		cfg := train.DefaultConfig()
		cfg.Comm, cfg.Train, cfg.Test, cfg.Epochs = comms[r], trainSet, testSet, 3
		cfg.StepCompute, cfg.Runner, cfg.Sync = 4*time.Millisecond, runner, syncs[r]
		tr, err := train.New(cfg)
		if err != nil {
			return err
		}
		reps[r], err = tr.Run(ctx)
		return err
	}))
	for r := 1; r < n; r++ {
		if reps[r].ParamsHash != reps[0].ParamsHash {
			t.Fatalf("rank %d params %s, rank 0 %s", r, reps[r].ParamsHash, reps[0].ParamsHash)
		}
	}
	last := reps[0].Epochs[len(reps[0].Epochs)-1]
	if last.TestAccuracy < 0.85 {
		t.Fatalf("test accuracy %.3f after 3 epochs; the adaptive job does not learn", last.TestAccuracy)
	}
	shares := syncs[0].Driver().Plan().Shares
	if shares[2]*2 >= shares[0] {
		t.Fatalf("shares %v: the 3× slow rank 2 should get well under half of rank 0's rows", shares)
	}
	t.Logf("accuracy %.3f, final shares %v", last.TestAccuracy, shares)
}
