package train

import (
	"github.com/ringtail-ml/ringtail/straggler"
	"github.com/ringtail-ml/ringtail/straggler/driver"
)

// StragglerSync plugs the straggler driver into a Trainer (Config.Sync):
// the gradients reduced under the driver's policy, each step's mode and
// evictions in the epoch statistics. ringtail-train's --mode adaptive and
// `ringtail bench straggler --tta` train through it.
func StragglerSync(s *driver.Sync) GradientSync { return stragglerSync{s} }

// stragglerSync is a driver.Sync with the trainer's Outcome.
type stragglerSync struct{ *driver.Sync }

// Outcome describes the last step for the epoch statistics.
func (s stragglerSync) Outcome() SyncOutcome {
	r := s.Last()
	return SyncOutcome{Mode: r.Plan.Mode.String(), Child: r.Role == straggler.RoleChild, Evicted: r.Plan.Evicted,
		Folded: r.Report.ChildSamples(), Staleness: r.Staleness}
}
