package synthetic

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/straggler"
)

// tally is the part of a rank's record of a synthetic run that summarize
// reads from the other ranks, in a form that crosses processes: times as
// Unix nanoseconds of the rank's wall clock (0: none), so the ranks'
// clocks must agree (one machine, as on a test bed; NTP-synchronised hosts
// add their offset to the reduction and wall times).
type tally struct {
	Applied      []int     `json:"applied"`
	Folded       []int     `json:"folded"`
	Stale        []float64 `json:"stale"`
	Mode         []int     `json:"mode"`
	Cut          []int     `json:"cut"`
	Enter        []int64   `json:"enter"`
	Leave        []int64   `json:"leave"`
	Start        []int64   `json:"start"`
	Computed     int64     `json:"computed"`
	ComputedAll  int64     `json:"computed_all"`
	FlushApplied int       `json:"flush_applied"`
	End          int64     `json:"end"`
}

// maxTally bounds one rank's encoded tally (a run of 10⁵ steps fits).
const maxTally = 64 << 20

func unixNanos(ts []time.Time) []int64 {
	out := make([]int64, len(ts))
	for i, t := range ts {
		if !t.IsZero() {
			out[i] = t.UnixNano()
		}
	}
	return out
}

func times(ns []int64) []time.Time {
	out := make([]time.Time, len(ns))
	for i, n := range ns {
		if n != 0 {
			out[i] = time.Unix(0, n)
		}
	}
	return out
}

func tallyOf(rec *rankRecord) tally {
	t := tally{Applied: rec.applied, Folded: rec.folded, Cut: rec.cut, Stale: slices.Clone(rec.stale),
		Mode: make([]int, len(rec.mode)), Enter: unixNanos(rec.enter), Leave: unixNanos(rec.leave), Start: unixNanos(rec.start),
		Computed: rec.computed, ComputedAll: rec.computedAll, FlushApplied: rec.flushApplied, End: rec.end.UnixNano()}
	for i, m := range rec.mode {
		t.Mode[i] = int(m)
	}
	for i, v := range t.Stale {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Stale[i] = 0 // JSON has no NaN; only steps that folded samples read it
		}
	}
	return t
}

// record rebuilds a rankRecord (without reports and plans) from a tally of
// a run of total steps.
func (t tally) record(total int) (rankRecord, error) {
	for _, n := range []int{len(t.Applied), len(t.Folded), len(t.Stale), len(t.Mode), len(t.Cut), len(t.Enter), len(t.Leave), len(t.Start)} {
		if n != total {
			return rankRecord{}, fmt.Errorf("a record of %d steps for a run of %d", n, total)
		}
	}
	rec := rankRecord{applied: t.Applied, folded: t.Folded, stale: t.Stale, cut: t.Cut, mode: make([]straggler.Mode, total),
		enter: times(t.Enter), leave: times(t.Leave), start: times(t.Start),
		computed: t.Computed, computedAll: t.ComputedAll, flushApplied: t.FlushApplied, end: time.Unix(0, t.End)}
	for i, m := range t.Mode {
		rec.mode[i] = straggler.Mode(m)
	}
	return rec, nil
}

// gatherRecords shares every rank's record of a run of total steps with
// every rank (two allgathers on comm: the sizes, then the tallies padded
// to the largest) and returns them by rank. Every record, this rank's
// own too, is the decoded tally (wall-clock times, no monotonic reading),
// so that every rank computes the same summary to the bit; this rank's
// keeps its reports, plans and policy.
func gatherRecords(ctx context.Context, comm *ringtail.Comm, rec *rankRecord, total int) ([]rankRecord, error) {
	me, n := comm.Rank(), comm.Size()
	b, err := json.Marshal(tallyOf(rec))
	if err != nil {
		return nil, fmt.Errorf("driver: synthetic rank %d: encoding its record: %w", me, err)
	}
	sizes := make([]int64, n)
	if err := comm.AllGather(ctx, ringtail.Int64s([]int64{int64(len(b))}), ringtail.Int64s(sizes)); err != nil {
		return nil, fmt.Errorf("driver: synthetic rank %d: gathering the records' sizes: %w", me, err)
	}
	width := slices.Max(sizes)
	if width <= 0 || width > maxTally {
		return nil, fmt.Errorf("driver: synthetic rank %d: a rank's record is %d bytes (limit %d)", me, width, maxTally)
	}
	mine := make([]byte, width)
	copy(mine, b)
	all := make([]byte, int(width)*n)
	if err := comm.AllGather(ctx, ringtail.Raw(mine, ringtail.Uint8), ringtail.Raw(all, ringtail.Uint8)); err != nil {
		return nil, fmt.Errorf("driver: synthetic rank %d: gathering the records: %w", me, err)
	}
	recs := make([]rankRecord, n)
	for r := range recs {
		if sizes[r] <= 0 || sizes[r] > width {
			return nil, fmt.Errorf("driver: synthetic rank %d: rank %d's record has %d bytes", me, r, sizes[r])
		}
		var t tally
		if err := json.Unmarshal(all[int64(r)*width:int64(r)*width+sizes[r]], &t); err != nil {
			return nil, fmt.Errorf("driver: synthetic rank %d: rank %d's record: %w", me, r, err)
		}
		if recs[r], err = t.record(total); err != nil {
			return nil, fmt.Errorf("driver: synthetic rank %d: rank %d's record: %w", me, r, err)
		}
	}
	recs[me].policy, recs[me].reports, recs[me].plans = rec.policy, rec.reports, rec.plans
	return recs, nil
}
