package driver

import (
	"math"
	"time"

	"github.com/ringtail-ml/ringtail/observe"
	"github.com/ringtail-ml/ringtail/straggler"
)

// record sends a finished step to the communicator's observability (the
// metrics, the timeline and the dashboard) when it is on; the Comm must
// implement observe.StepRecorder (*ringtail.Comm does).
func (d *Driver) record(res Result, began time.Time) {
	rec, ok := d.comm.(observe.StepRecorder)
	if !ok || !rec.Observing() {
		return
	}
	ev := StepEvent(d.rank, d.world, res, time.Now())
	ev.Began = began
	rec.RecordStep(ev)
}

// ObservedPlan converts a plan to what observability shows.
func ObservedPlan(p straggler.Plan) observe.Plan {
	op := observe.Plan{Step: p.Step, Mode: p.Mode.String(), Members: p.Members, Evicted: p.Evicted, Late: p.Late,
		Staleness: p.Staleness, WaitUntil: p.WaitUntil, Budget: p.Budget, Shares: p.Shares, Predicted: p.Predicted,
		PerSample: p.PerSample, Stragglers: p.Stragglers}
	for _, a := range p.Parents {
		op.Parents = append(op.Parents, observe.Parent{Child: a.Child, Parent: a.Parent, Must: a.Must})
	}
	return op
}

// StepEvent builds rank's observe.StepEvent of a finished member step from
// its Result, the reduction having ended at ended: the plans, every
// member's arrival and compute from the decoded report (−1 for ranks that
// computed as children), and by rank the staleness of the child gradients
// folded in the step (rounded mean; 0 for members, −1 where none).
func StepEvent(rank, world int, res Result, ended time.Time) observe.StepEvent {
	ev := observe.StepEvent{Step: res.Step, Rank: rank, Role: res.Role.String(), Plan: ObservedPlan(res.Plan), Next: ObservedPlan(res.Next),
		Arrivals: make([]time.Duration, world), Computes: make([]time.Duration, world), Staleness: make([]int, world),
		Applied: res.Applied, Late: res.Report.ChildSamples(), Ended: ended, Arrived: ended.Add(-res.Wait)}
	rep := res.Report
	for r := 0; r < world; r++ {
		ev.Arrivals[r], ev.Computes[r], ev.Staleness[r] = -1, -1, -1
		if r < len(rep.Current) && rep.Current[r].Present {
			ev.Arrivals[r], ev.Computes[r], ev.Staleness[r] = rep.Current[r].Arrival, rep.Current[r].Compute, 0
		}
		if r < len(rep.Child) && rep.Child[r].Count > 0 {
			ev.Staleness[r] = int(math.Round(rep.Child[r].Staleness(res.Step)))
			ev.Computes[r] = rep.Child[r].Compute / time.Duration(rep.Child[r].Count)
		}
	}
	if rank < len(rep.Current) && rep.Current[rank].Present {
		ev.Began = ev.Arrived.Add(-rep.Current[rank].Arrival)
		ev.Compute = rep.Current[rank].Compute
	}
	return ev
}
