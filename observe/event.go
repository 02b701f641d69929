package observe

import "time"

// StepRecorder records steps; *ringtail.Comm implements it. Observing
// reports whether anything records them (metrics, a timeline or the
// event stream are on), so a caller can skip building events when not.
type StepRecorder interface {
	Observing() bool
	RecordStep(ev StepEvent)
}

// Parent pairs an evicted rank with the ring member that collects its
// gradient.
type Parent struct {
	Child  int `json:"child"`
	Parent int `json:"parent"`
	// Must says the parent waits for the child this step (the
	// staleness bound reached).
	Must bool `json:"must,omitempty"`
}

// Plan is a step's plan as observability shows it: the mode, who is in the
// ring and who is evicted to which parent, the wait t_w, the shares of the
// global batch and the predicted arrivals. Slices by rank have one entry
// per rank of the world (or are empty when unknown).
type Plan struct {
	// Step is the step the plan governs.
	Step int `json:"step"`
	// Mode is the plan's mode: "ring" (everyone in the ring, BSP),
	// "overlap" (the exact mode: the others reduce-scatter while Late is
	// still computing) or "evict" (evicted ranks compute at their own pace
	// and contribute through parents).
	Mode string `json:"mode"`
	// Late is the rank the overlap waits for last (−1: none).
	Late int `json:"late"`
	// Staleness is the bound K on an evicted rank's gradients.
	Staleness int `json:"staleness,omitempty"`
	// Members are the ring's ranks; Evicted the others, with their Parents.
	Members []int    `json:"members,omitempty"`
	Evicted []int    `json:"evicted,omitempty"`
	Parents []Parent `json:"parents,omitempty"`
	// WaitUntil is t_w: how long after their step start parents wait for
	// their children (0: no wait).
	WaitUntil time.Duration `json:"wait_until_ns,omitempty"`
	// Budget is the compute budget of every rank (0: none).
	Budget time.Duration `json:"budget_ns,omitempty"`
	// Shares are each rank's samples of the global batch.
	Shares []int `json:"shares,omitempty"`
	// Predicted are the predicted arrivals at the reduction, from each
	// rank's step start (0: unknown).
	Predicted []time.Duration `json:"predicted_ns,omitempty"`
	// PerSample is each rank's predicted compute time of one sample (0:
	// not yet measured): the controller's view of who is slow.
	PerSample []time.Duration `json:"per_sample_ns,omitempty"`
	// Stragglers are the ranks predicted to straggle.
	Stragglers []int `json:"stragglers,omitempty"`
}

// StepEvent is one training step as one rank saw it, recorded once the
// step's reduction is done. Every rank of a driver-run job sees the same
// Plan, Next, Arrivals and Staleness (they travel in the reduced buffer);
// the times of this rank (Began, Arrived, Ended, Compute, ChildWait) are
// its own.
type StepEvent struct {
	// Step is the step number.
	Step int `json:"step"`
	// Rank is the rank recording it; Role its role in the step
	// ("member", "parent", "child").
	Rank int    `json:"rank"`
	Role string `json:"role,omitempty"`
	// Plan is the plan the step ran under; Next the plan decided from it
	// for the next step (the controller's decision).
	Plan Plan `json:"plan"`
	Next Plan `json:"next"`
	// Arrivals are each rank's arrival at the reduction, from its step
	// start; −1 where the rank's report of this step is not in (late).
	Arrivals []time.Duration `json:"arrivals_ns"`
	// Computes are each rank's compute time (−1 where unknown).
	Computes []time.Duration `json:"computes_ns,omitempty"`
	// Staleness is, by rank, how many steps old the gradients folded for it
	// in this step are (an evicted rank's, rounded mean): 0 for a member on
	// time, −1 none folded.
	Staleness []int `json:"staleness,omitempty"`
	// Applied is the number of samples whose gradients the step applied;
	// Late the part of them from evicted ranks' gradients; Carried is kept
	// for compatibility and always 0.
	Applied int `json:"applied"`
	Late    int `json:"late"`
	Carried int `json:"carried"`
	// Began is this rank's step start, Arrived its entering the
	// reduction, Ended the reduction's end (zero: unknown).
	Began   time.Time `json:"began"`
	Arrived time.Time `json:"arrived"`
	Ended   time.Time `json:"ended"`
	// Compute is this rank's compute time from Began; ChildWait the time
	// it waited for its children as a parent.
	Compute   time.Duration `json:"compute_ns"`
	ChildWait time.Duration `json:"child_wait_ns,omitempty"`
}
