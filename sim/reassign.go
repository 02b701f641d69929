package sim

import (
	"fmt"
	"time"

	"github.com/ringtail-ml/ringtail/straggler"
	"github.com/ringtail-ml/ringtail/straggler/inject"
)

// ReassignMsgBytes is the size the simulator prices a reassignment message
// at (a progress report, an offer or an answer: a few integers).
const ReassignMsgBytes = 64

// ReassignPrice is in-step reassignment's price over steps [from, to) of a
// pattern.
type ReassignPrice struct {
	// PerBatch is the mean step: every unit computed, then the ring
	// all-reduce over every rank.
	PerBatch time.Duration
	// Moved is the fraction of the batch's units granted to helpers.
	Moved float64
	// Messages is the mean number of messages per step.
	Messages float64
}

// Reassign prices in-step reassignment (straggler.SimulateReassign) for
// steps [from, to) of a pattern: the step's shares cut into units of
// cfg.UnitSize samples; rank r computes n samples of step s in a_r + b_r·n (the
// injector's affine compute: a_r, a per-step delay, before its first unit;
// b_r per sample); each message takes the cost model's price of
// ReassignMsgBytes over the link; the step ends when every rank is done,
// then the ring all-reduce of gradBytes.
//
// plan, when set, gives each step's shares (a policy's plan: reassignment
// within the step on top of the shares decided before it; they must sum
// to globalBatch); nil gives every step equal shares.
func Reassign(in *inject.Injector, ranks, from, to, globalBatch int, perSample time.Duration, gradBytes int, net Network,
	cfg straggler.ReassignConfig, plan func(step int) []int) (ReassignPrice, error) {
	if ranks < 1 || to <= from || globalBatch < ranks {
		return ReassignPrice{}, fmt.Errorf("sim: reassign over %d ranks, steps [%d, %d), batch %d: %w", ranks, from, to, globalBatch, ErrInvalidConfig)
	}
	equal := make([]int, ranks)
	for r := range equal {
		equal[r] = globalBatch / ranks
		if r < globalBatch%ranks {
			equal[r]++
		}
	}
	base := perSample * time.Duration(globalBatch) / time.Duration(ranks)
	units := 0
	var price ReassignPrice
	var sum time.Duration
	begin := make([]time.Duration, ranks)
	per := make([]float64, ranks) // ns per sample
	for s := from; s < to; s++ {
		shares := equal
		if plan != nil {
			shares = plan(s)
			total := 0
			for _, sh := range shares {
				total += sh
			}
			if len(shares) != ranks || total != globalBatch {
				return ReassignPrice{}, fmt.Errorf("sim: reassign step %d: plan shares %v do not split %d samples over %d ranks: %w",
					s, shares, globalBatch, ranks, ErrInvalidConfig)
			}
		}
		for r := range ranks {
			// The rank's speed, from the compute of an equal share.
			a, full := time.Duration(0), time.Duration(equal[r])*perSample
			if in != nil {
				a = in.At(r, s, 0).Compute
				full = in.At(r, s, time.Duration(equal[r])*perSample).Compute
			}
			begin[r], per[r] = a, float64(full-a)/float64(equal[r])
		}
		out, err := straggler.SimulateReassign(straggler.ReassignStep{Config: cfg, Step: s, Shares: shares, Expect: base, Begin: begin,
			UnitTime: func(r int, u straggler.Unit, _ time.Duration) time.Duration {
				return time.Duration(per[r] * float64(u.Hi-u.Lo))
			},
			Latency: net.Send(ReassignMsgBytes)})
		if err != nil {
			return ReassignPrice{}, fmt.Errorf("sim: reassign step %d: %w", s, err)
		}
		sum += out.End
		price.Moved += float64(out.Moved)
		price.Messages += float64(out.Messages)
		for _, c := range out.Computed {
			units += len(c)
		}
	}
	k := to - from
	price.PerBatch = sum/time.Duration(k) + net.Ring(ranks, gradBytes)
	price.Moved /= float64(units)
	price.Messages /= float64(k)
	return price, nil
}
