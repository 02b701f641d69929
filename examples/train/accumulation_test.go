package train

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/straggler"
	"github.com/ringtail-ml/ringtail/straggler/driver"
	"github.com/ringtail-ml/ringtail/straggler/inject"
)

// Micro-batches change how a rank computes its share, not the update:
// the gradients are summed row by row either way, so a BSP job whose
// ranks accumulate under mixed caps (3, 3, unbounded, 5 rows of a
// 16-row share) ends with the bits of the job that computes each share in
// one pass, and no rank ever computes more rows at once than its cap.
func TestMicroBatchesUnderMixedCapsGiveTheSameParameters(t *testing.T) {
	tr, te := split(t, 400)
	base := fastConfig(tr, te)
	base.Epochs = 2
	plain := newJob(t, 4, base, nil).mustRun(t)

	caps := []int{3, 3, 0, 5}
	comms := startComms(t, 4)
	j := &job{}
	for r, c := range comms {
		cfg := base
		cfg.Comm, cfg.MicroCap = c, caps[r]
		trn, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		j.trainers = append(j.trainers, trn)
	}
	capped := j.mustRun(t)
	if capped[0].ParamsHash != plain[0].ParamsHash {
		t.Fatalf("parameters %s under micro-batch caps, %s in one pass", capped[0].ParamsHash, plain[0].ParamsHash)
	}
	for _, rep := range capped {
		if !rep.ParamsIdentical || len(rep.Ranks) != 4 {
			t.Fatalf("rank %d: identical %v, %d rank stats", rep.Rank, rep.ParamsIdentical, len(rep.Ranks))
		}
	}
	for r, s := range capped[0].Ranks {
		switch {
		case caps[r] > 0 && (s.MaxMicro > caps[r] || s.MaxAccum < 2):
			t.Fatalf("rank %d under cap %d: %+v", r, caps[r], s)
		case caps[r] == 0 && (s.MaxMicro != 16 || s.MaxAccum != 1):
			t.Fatalf("unbounded rank %d: %+v, want one pass of 16", r, s)
		case s.MicroCap != caps[r] || s.Samples != 2*400/4:
			t.Fatalf("rank %d: %+v, want cap %d and 200 rows", r, s, caps[r])
		}
	}
}

// The NVML mock's mix on the training path: ranks 0 and 1 emulate P100s
// (3× slower, micro-batches of at most 7 rows), 2 and 3 V100s (at most
// 11). The shares policy plans within each device's memory (at most 2
// passes), the trainer computes each share as accumulation × micro-batch,
// and every rank applies the identical update.
func TestSharesPlanUnderMixedDeviceMemory(t *testing.T) {
	const n = 4
	caps := []int{7, 7, 11, 11}
	tr, te := split(t, 640)
	spec, err := inject.Parse("slow=0,1:3x")
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
		pol, err := straggler.Preset(straggler.NameShares, n, 64)
		if err != nil {
			t.Fatal(err)
		}
		pol.Prior = []float64{3, 3, 1, 1}
		pol.Memory = &straggler.Memory{MicroCap: caps, MaxAccum: 2}
		runner, err := inject.NewRunner(inject.RunnerConfig{Injector: in, Rank: r, Logger: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		cfg := fastConfig(tr, te)
		cfg.Epochs, cfg.Batch = 2, 64
		cfg.Comm, cfg.MicroCap, cfg.Runner = c, caps[r], runner
		cfg.StepCompute = 2 * time.Millisecond
		cfg.Sync = StragglerSync(driver.NewSync(driver.Config{Comm: c, Policy: pol}))
		trn, err := New(cfg)
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
	total := 0
	for r, s := range reps[0].Ranks {
		if s.MaxMicro > caps[r] || s.MaxMicro < 1 {
			t.Fatalf("rank %d computed a micro-batch of %d rows, cap %d (%+v)", r, s.MaxMicro, caps[r], s)
		}
		total += s.Samples
	}
	if total != 2*640 {
		t.Fatalf("ranks computed %d rows as members, want every row of 2 epochs (1280)", total)
	}
	// At step 0 the priors give the V100s 24 rows each, above their cap:
	// they accumulate.
	if v := reps[0].Ranks[2]; v.MaxAccum < 2 {
		t.Fatalf("V100 rank 2: %+v, want accumulation", v)
	}
}
