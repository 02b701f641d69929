package train

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/balance"
)

// RankStats is one rank's view of the run, gathered onto every rank at
// the end (Report.Ranks): how long its steps took to reach the reduction
// and the micro-batches it computed them in.
type RankStats struct {
	// Rank is the rank these are of.
	Rank int `json:"rank"`
	// BusyMean is the mean time from a step's start to this rank's
	// arrival at the reduction (its compute and padding), over the steps
	// it computed as a member: the per-rank step time that says whether
	// steps finish together.
	BusyMean time.Duration `json:"busy_mean_ns"`
	// Samples is the rows it computed as a member, over the run.
	Samples int `json:"samples"`
	// MicroCap is its largest allowed micro-batch (0: unbounded).
	MicroCap int `json:"micro_cap,omitempty"`
	// MaxMicro is the largest micro-batch it computed, MaxAccum the most
	// micro-batches in one step, Passes the micro-batches over the run.
	MaxMicro int `json:"max_micro"`
	MaxAccum int `json:"max_accum"`
	Passes   int `json:"passes"`
}

// memoryStats accumulates this rank's RankStats during the run.
type memoryStats struct {
	busy     time.Duration
	steps    int
	samples  int
	maxMicro int
	maxAccum int
	passes   int
}

// computeShare adds the gradient of rows to grad in micro-batches of at
// most Config.MicroCap rows (balance.SplitShare: the fewest near-equal
// ones), as a device whose memory holds no more would: the gradients are
// summed over the micro-batches, so the step's update, the sum divided by
// the samples applied, is the same whatever the split. It returns the
// rows' loss sum.
func (t *Trainer) computeShare(rows []int, grad []float32) float64 {
	m := balance.SplitShare(len(rows), t.cfg.MicroCap)
	loss := 0.0
	at := 0
	for _, size := range m.Sizes() {
		loss += t.model.AccumulateGradient(t.cfg.Train, rows[at:at+size], grad)
		at += size
		t.mem.maxMicro = max(t.mem.maxMicro, size)
	}
	t.mem.maxAccum = max(t.mem.maxAccum, m.Accum)
	t.mem.passes += m.Accum
	return loss
}

// arrived records a step's time to the reduction and its rows, for a
// member's step (a child's own-pace steps are not the job's).
func (t *Trainer) arrived(busy time.Duration, rows int, child bool) {
	if child {
		return
	}
	t.mem.busy += busy
	t.mem.steps++
	t.mem.samples += rows
}

// rankFields is the number of float64 slots per rank in gatherRanks.
const rankFields = 6

// gatherRanks sums every rank's statistics into one buffer (a
// collective: every rank calls it at the end of Run) and returns them by
// rank.
func (t *Trainer) gatherRanks(ctx context.Context) ([]RankStats, error) {
	buf := make([]float64, rankFields*t.world)
	mine := buf[rankFields*t.rank:]
	busy := 0.0
	if t.mem.steps > 0 {
		busy = float64(t.mem.busy) / float64(t.mem.steps)
	}
	mine[0], mine[1], mine[2] = busy, float64(t.mem.samples), float64(t.cfg.MicroCap)
	mine[3], mine[4], mine[5] = float64(t.mem.maxMicro), float64(t.mem.maxAccum), float64(t.mem.passes)
	if err := t.cfg.Comm.AllReduce(ctx, ringtail.Float64s(buf), ringtail.Sum); err != nil {
		return nil, fmt.Errorf("train: rank %d: gathering per-rank statistics: %w", t.rank, err)
	}
	out := make([]RankStats, t.world)
	for r := range out {
		f := buf[rankFields*r:]
		out[r] = RankStats{Rank: r, BusyMean: time.Duration(math.Round(f[0])), Samples: int(f[1]), MicroCap: int(f[2]),
			MaxMicro: int(f[3]), MaxAccum: int(f[4]), Passes: int(f[5])}
	}
	return out, nil
}

// BusySpread is the slowest rank's mean time to the reduction over the
// fastest's, minus one (0.1: steps finish within 10% of each other), over
// ranks that computed as members; 0 with fewer than two.
func BusySpread(ranks []RankStats) float64 {
	lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
	n := 0
	for _, r := range ranks {
		if r.Samples == 0 || r.BusyMean <= 0 {
			continue
		}
		lo, hi = min(lo, r.BusyMean), max(hi, r.BusyMean)
		n++
	}
	if n < 2 {
		return 0
	}
	return float64(hi)/float64(lo) - 1
}
