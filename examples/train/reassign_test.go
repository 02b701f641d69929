package train

import (
	"math"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/straggler"
	"github.com/ringtail-ml/ringtail/straggler/driver"
	"github.com/ringtail-ml/ringtail/straggler/inject"
)

// In-step reassignment changes who computes each row, not the update:
// four ranks, one 3× slow and one 2× slow, train under the driver with
// units of 2 rows moving within each step, and end with one rank's
// parameters (float rounding aside: the rows are summed in another
// order), identical on every rank, every row of every epoch computed once.
func TestReassignTrainsLikeOneRank(t *testing.T) {
	const n = 4
	tr, te := split(t, 256)
	cfg := fastConfig(tr, te)
	cfg.Batch, cfg.Epochs = 64, 2
	one := newJob(t, 1, cfg, nil)
	one.mustRun(t)

	spec, err := inject.Parse("slow=2:3x;slow=1:2x")
	if err != nil {
		t.Fatal(err)
	}
	in, err := inject.New(spec, n)
	if err != nil {
		t.Fatal(err)
	}
	comms := startComms(t, n)
	j := &job{}
	for r, c := range comms {
		pol, err := straggler.Preset(straggler.NameBSP, n, cfg.Batch)
		if err != nil {
			t.Fatal(err)
		}
		pol.Reassign, pol.ReassignAt = true, -1 // every step that can, whatever the predictions
		runner, err := inject.NewRunner(inject.RunnerConfig{Injector: in, Rank: r, Logger: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		rc := cfg
		rc.Comm, rc.Runner, rc.StepCompute = c, runner, 8*time.Millisecond
		rc.Reassign = straggler.DefaultReassignConfig(2)
		rc.Sync = StragglerSync(driver.NewSync(driver.Config{Comm: c, Policy: pol}))
		trn, err := New(rc)
		if err != nil {
			t.Fatal(err)
		}
		j.trainers = append(j.trainers, trn)
	}
	reps := j.mustRun(t)
	for r, rep := range reps {
		if !rep.ParamsIdentical || rep.ParamsHash != reps[0].ParamsHash {
			t.Fatalf("rank %d: parameters %s (identical %v), rank 0's %s", r, rep.ParamsHash, rep.ParamsIdentical, reps[0].ParamsHash)
		}
	}
	worst := 0.0
	for i, p := range j.trainers[0].Model().Params {
		worst = max(worst, math.Abs(float64(p-one.trainers[0].Model().Params[i])))
	}
	if worst > 1e-4 {
		t.Fatalf("parameters differ from one rank's by up to %g", worst)
	}
	total, moved, helped := 0, 0, 0
	for r, s := range reps[0].Ranks {
		total += s.Samples
		t.Logf("rank %d: %d rows", r, s.Samples)
	}
	for _, rep := range reps {
		for _, e := range rep.Epochs {
			moved += e.Moved
			helped += e.Helped
		}
	}
	if total != cfg.Epochs*tr.Len() || moved != helped {
		t.Fatalf("ranks computed %d rows (want %d), %d units given and %d helped", total, cfg.Epochs*tr.Len(), moved, helped)
	}
	t.Logf("%d units moved", moved)
}
