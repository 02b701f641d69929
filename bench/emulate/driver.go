package emulate

import (
	"fmt"
	"math"
	"time"

	"github.com/ringtail-ml/ringtail/balance"
	"github.com/ringtail-ml/ringtail/straggler"
)

// AntDTDriver plans the case as the live driver does (ringtail-train
// --mode adaptive --policy shares --sample-bytes): straggler.Policy with
// the shares preset and a memory plan (every rank's micro-batch cap the
// class's MaxBatch, at most MaxAccum passes), step 0 seeded with the
// classes' speeds as device priors, each step's shares split into
// micro-batches by Config.Micro, and each step's emulated compute times
// (the case's time model, micro-batch by micro-batch) reported back as
// the ranks' measurements. Scheme "driver(shares+memory)". It returns an
// error if any planned micro-batch exceeds its rank's cap.
func AntDTDriver(c AntDTCase) (EpochPlan, error) {
	if err := c.Validate(); err != nil {
		return EpochPlan{}, err
	}
	var ranks []balance.DeviceClass
	fastest := 0.0
	for _, cl := range c.Classes {
		fastest = math.Max(fastest, cl.Speed)
		for range cl.Count {
			ranks = append(ranks, cl)
		}
	}
	n := len(ranks)
	if n == 0 {
		return EpochPlan{}, fmt.Errorf("%w: no ranks", balance.ErrInvalidInput)
	}
	cfg, err := straggler.Preset(straggler.NameShares, n, c.GlobalBatch)
	if err != nil {
		return EpochPlan{}, err
	}
	caps := make([]int, n)
	cfg.Prior = make([]float64, n)
	for r, cl := range ranks {
		caps[r] = cl.MaxBatch
		cfg.Prior[r] = fastest / cl.Speed
	}
	cfg.Memory = &straggler.Memory{MicroCap: caps, MaxAccum: c.MaxAccum}
	pol, err := straggler.NewPolicy(cfg)
	if err != nil {
		return EpochPlan{}, err
	}
	steps := c.Samples / c.GlobalBatch
	out := EpochPlan{Case: c.Name, Scheme: "driver(shares+memory)", StepS: make([][]float64, steps)}
	for k := range steps {
		plan := pol.Plan()
		rep := straggler.Report{Step: plan.Step, Current: make([]straggler.RankReport, n), Child: make([]straggler.ChildReport, n)}
		out.StepS[k] = make([]float64, n)
		for r, m := range pol.Config().Micro(plan) {
			if m.Batch > caps[r] {
				return EpochPlan{}, fmt.Errorf("step %d: rank %d planned a micro-batch of %d above its cap %d", k, r, m.Batch, caps[r])
			}
			s := 0.0
			for _, b := range m.Sizes() {
				s += microBatchS(b, ranks[r])
			}
			out.StepS[k][r] = s
			if !plan.IsMember(r) {
				continue
			}
			d := time.Duration(math.Round(s * 1e9))
			rep.Current[r] = straggler.RankReport{Present: true, Samples: m.Share, Compute: d, Arrival: d, Wait: time.Millisecond}
			rep.Applied += m.Share
		}
		if _, err := pol.Observe(rep); err != nil {
			return EpochPlan{}, fmt.Errorf("step %d: %w", k, err)
		}
	}
	return out, nil
}
