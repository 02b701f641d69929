package driver

import (
	"time"

	"github.com/ringtail-ml/ringtail/observe"
	"github.com/ringtail-ml/ringtail/straggler/driver/policy"
)

// record sends a finished step to the communicator's observability (the
// metrics, the timeline and the dashboard) when it is on; the Comm must
// implement observe.StepRecorder (*ringtail.Comm does).
func (d *Driver) record(res Result) {
	rec, ok := d.comm.(observe.StepRecorder)
	if !ok || !rec.Observing() {
		return
	}
	rec.RecordStep(StepEvent(d.rank, d.world, res, time.Now()))
}

// ObservedPlan converts a policy plan to what observability shows.
func ObservedPlan(p policy.Plan) observe.Plan {
	op := observe.Plan{Step: p.Step, Mode: p.Mode.String(), Members: p.Members, Evicted: p.Evicted, WaitUntil: p.WaitUntil,
		Budget: p.Budget, Shares: p.Shares, Predicted: p.Predicted, PerSample: p.PerSample, Stragglers: p.Stragglers}
	for _, a := range p.Parents {
		op.Parents = append(op.Parents, observe.Parent{Child: a.Child, Parent: a.Parent})
	}
	return op
}

// StepEvent builds rank's observe.StepEvent of a finished step from its
// Result, the reduction having ended at ended: the plans, every rank's
// arrival and compute from the decoded report (−1 where a rank's report
// is not in: it is late), staleness (1 for ranks whose previous gradient
// was folded late, 0 on time, −1 none), and this rank's own times (its
// step start is known when its own report is in).
func StepEvent(rank, world int, res Result, ended time.Time) observe.StepEvent {
	ev := observe.StepEvent{Step: res.Step, Rank: rank, Role: res.Role.String(), Plan: ObservedPlan(res.Plan), Next: ObservedPlan(res.Next),
		Arrivals: make([]time.Duration, world), Computes: make([]time.Duration, world), Staleness: make([]int, world),
		Applied: res.Applied, Late: res.Late, Carried: res.Carried, Ended: ended, Arrived: ended.Add(-res.Wait)}
	rep := res.Report
	for r := 0; r < world; r++ {
		ev.Arrivals[r], ev.Computes[r], ev.Staleness[r] = -1, -1, -1
		if r < len(rep.Current) && rep.Current[r].Present {
			ev.Arrivals[r], ev.Computes[r], ev.Staleness[r] = rep.Current[r].Arrival, rep.Current[r].Compute, 0
		}
		if r < len(rep.Late) && rep.Late[r].Present {
			ev.Staleness[r] = 1
		}
	}
	if rank < len(rep.Current) && rep.Current[rank].Present {
		ev.Began = ev.Arrived.Add(-rep.Current[rank].Arrival)
		ev.Compute = rep.Current[rank].Compute
	}
	return ev
}
