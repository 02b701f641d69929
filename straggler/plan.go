package straggler

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Plan is the Controller's decision for one step. Plans are plain data:
// the executor applies them, loggers print them, tests compare their dumps.
type Plan struct {
	// Step is the step the plan applies to.
	Step int
	// DecidedAt is the step whose observations closed and produced the
	// plan (Step − Config.Lead); −1 for the initial default plan.
	DecidedAt int
	// Choice is the mode choice: mode, evicted ranks, t_w, candidates.
	Choice
	// Phi is the φ the choice used.
	Phi float64
	// Collective is the predicted ring collective duration C used.
	Collective time.Duration
	// Carry lists, for every evicted rank, how its gradient is kept if it
	// misses the wait window. No gradient is ever dropped.
	Carry []Carry
	// Classes lists the ranks whose class is not ClassNone, by rank.
	Classes []RankClass
	// Missing lists ranks whose observation of DecidedAt never came (the
	// step was closed by Tick); their arrival was taken as at least the
	// latest one observed.
	Missing []int
}

// Carry says how an evicted rank's gradient is kept when it misses the
// parent's wait window: the executor folds the gradient of step From into
// the aggregate of the first later step it reaches, and at the latest into
// step Latest = From + StalenessBound, whose aggregation waits for it.
// Staleness is thus bounded by StalenessBound and nothing is lost.
type Carry struct {
	// Rank is the evicted rank.
	Rank int
	// From is the step whose gradient may be late (the plan's step).
	From int
	// Latest is the last step that may absorb it; that step blocks on it.
	Latest int
	// PredictedLate says whether the rank is predicted to miss t_w.
	PredictedLate bool
}

// RankClass pairs a rank with its class.
type RankClass struct {
	// Rank is the rank.
	Rank int
	// Class is its class.
	Class Class
}

// Dump returns the plan as one line of JSON. Field order and float
// formatting are fixed, so equal plans give byte-identical dumps.
func (p Plan) Dump() []byte {
	b, err := json.Marshal(p)
	if err != nil {
		// Plan holds only numbers, strings, slices and text marshalers
		// that cannot fail; reaching this is a programming error.
		panic(fmt.Sprintf("straggler: marshalling plan: %v", err))
	}
	return b
}

// String is a short human-readable summary for logs.
func (p Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "step %d: %s", p.Step, p.Mode)
	if p.Mode == ModeEvict {
		fmt.Fprintf(&b, " %v t_w=%v", p.Evicted, p.Wait)
	}
	fmt.Fprintf(&b, " T_a=%.4gs stragglers=%v", p.Cost, p.Stragglers)
	if len(p.Missing) > 0 {
		fmt.Fprintf(&b, " missing=%v", p.Missing)
	}
	return b.String()
}
