package obs

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// StragglerChange is a change of the job's straggler set as the step
// events show it: the ranks the controller predicts to straggle or
// evicts, and those whose predicted time per sample is over SlowFactor
// times the median rank's (the shares policy gives them less data and
// never names them).
type StragglerChange struct {
	// Step is the step whose plan (its Next) shows the new set.
	Step int
	// Ranks are the stragglers, ascending; empty: none any more.
	Ranks []int
	// Slowdown is each one's time per sample over the median rank's (0:
	// not measured); Share its samples of the global batch, of Batch.
	Slowdown []float64
	Share    []int
	Batch    int
}

// String is the launcher's line: "step 12: rank 2 is straggling (3.0× the
// median time per sample, 6 of 64 samples (9%))", "step 15: ranks 1, 2
// are straggling (rank 1: ...; rank 2: ...)" or "step 40: no rank is
// straggling now".
func (c StragglerChange) String() string {
	if len(c.Ranks) == 0 {
		return fmt.Sprintf("step %d: no rank is straggling now", c.Step)
	}
	why := make([]string, len(c.Ranks))
	for i := range c.Ranks {
		var w []string
		if c.Slowdown[i] > 0 {
			w = append(w, fmt.Sprintf("%.1f× the median time per sample", c.Slowdown[i]))
		}
		if c.Batch > 0 {
			w = append(w, fmt.Sprintf("%d of %d samples (%.0f%%)", c.Share[i], c.Batch, 100*float64(c.Share[i])/float64(c.Batch)))
		}
		why[i] = strings.Join(w, ", ")
	}
	if len(c.Ranks) == 1 {
		if why[0] == "" {
			return fmt.Sprintf("step %d: rank %d is straggling", c.Step, c.Ranks[0])
		}
		return fmt.Sprintf("step %d: rank %d is straggling (%s)", c.Step, c.Ranks[0], why[0])
	}
	names := make([]string, len(c.Ranks))
	var parts []string
	for i, r := range c.Ranks {
		names[i] = fmt.Sprint(r)
		if why[i] != "" {
			parts = append(parts, fmt.Sprintf("rank %d: %s", r, why[i]))
		}
	}
	line := fmt.Sprintf("step %d: ranks %s are straggling", c.Step, strings.Join(names, ", "))
	if len(parts) > 0 {
		line += " (" + strings.Join(parts, "; ") + ")"
	}
	return line
}

// SlowFactor is how many times the median rank's predicted time per
// sample makes a rank a straggler (the dashboard's page uses the same).
const SlowFactor = 1.5

// stragglerHold is how many steps in a row a new set must show before it
// is reported, so that a set flapping on a loaded machine is not.
const stragglerHold = 3

// stragglerWatch turns a job's step events, in step order, into changes
// of its straggler set. Owned by one goroutine.
type stragglerWatch struct {
	reported  []int // nil: nothing reported yet (and no straggler)
	candidate []int
	seen      int
	lastStep  int
}

// observe takes one step's event and returns a change to report, if any.
func (w *stragglerWatch) observe(m *stepMsg) (StragglerChange, bool) {
	if m.Step <= w.lastStep && w.seen > 0 {
		return StragglerChange{}, false // replayed, or another rank's copy
	}
	w.lastStep = m.Step
	set, slow := stragglerSet(&m.Next)
	if !slices.Equal(set, w.candidate) {
		w.candidate, w.seen = set, 0
	}
	w.seen++
	if w.seen < stragglerHold || slices.Equal(set, w.reported) || (w.reported == nil && len(set) == 0) {
		return StragglerChange{}, false
	}
	w.reported = set
	if w.reported == nil {
		w.reported = []int{}
	}
	c := StragglerChange{Step: m.Step, Ranks: set}
	for _, n := range m.Next.Shares {
		c.Batch += n
	}
	for _, r := range set {
		var f float64
		share := 0
		if r >= 0 && r < len(slow) {
			f = slow[r]
		}
		if r >= 0 && r < len(m.Next.Shares) {
			share = m.Next.Shares[r]
		}
		c.Slowdown, c.Share = append(c.Slowdown, f), append(c.Share, share)
	}
	return c, true
}

// stragglerSet returns the stragglers of a plan, ascending, and by rank
// each one's time per sample over the median rank's (0: unknown).
func stragglerSet(p *planMsg) ([]int, []float64) {
	in := map[int]bool{}
	for _, r := range p.Stragglers {
		in[r] = true
	}
	for _, r := range p.Evicted {
		in[r] = true
	}
	slow := make([]float64, len(p.PerSampleMs))
	var known []float64
	for _, v := range p.PerSampleMs {
		if v > 0 {
			known = append(known, v)
		}
	}
	if len(known) > 0 {
		sort.Float64s(known)
		med := known[len(known)/2]
		if len(known)%2 == 0 {
			med = (known[len(known)/2-1] + known[len(known)/2]) / 2
		}
		for r, v := range p.PerSampleMs {
			if v > 0 && med > 0 {
				slow[r] = v / med
				if v > SlowFactor*med {
					in[r] = true
				}
			}
		}
	}
	set := make([]int, 0, len(in))
	for r := range in {
		set = append(set, r)
	}
	sort.Ints(set)
	return set, slow
}
