package train

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"time"
)

// EpochStats are one epoch's numbers. Loss is the mean training loss over
// the epoch's samples (each measured before its step's update); the timing
// means are per step, as this rank saw them.
type EpochStats struct {
	// Epoch counts from 1.
	Epoch int `json:"epoch"`
	// Loss is the mean training cross-entropy over the epoch, all ranks.
	Loss float64 `json:"loss"`
	// TestLoss and TestAccuracy (0..1) are measured on the held-out set
	// after the epoch; every rank computes the same values.
	TestLoss     float64 `json:"test_loss"`
	TestAccuracy float64 `json:"test_accuracy"`
	// Steps and Samples count the epoch's steps and global samples.
	Steps   int `json:"steps"`
	Samples int `json:"samples"`
	// StepMean is the mean wall time of a step: compute + pad + comm +
	// update.
	StepMean time.Duration `json:"step_mean_ns"`
	// ComputeMean is the mean real compute (forward and backward) of this
	// rank's shard.
	ComputeMean time.Duration `json:"compute_mean_ns"`
	// PadMean is the mean sleep that padded compute to the (injected) step
	// compute duration.
	PadMean time.Duration `json:"pad_mean_ns"`
	// CommMean is the mean time in the gradient AllReduce, waiting for
	// slower ranks included.
	CommMean time.Duration `json:"comm_mean_ns"`
	// SamplesPerSec is global samples over the summed step time.
	SamplesPerSec float64 `json:"samples_per_sec"`
	// Applied is the samples whose gradients reached the model in the
	// epoch's steps (under eviction a step applies the members' rows and
	// whatever evicted ranks' gradients were folded into it); BatchTime
	// is the step time per global batch of applied samples.
	Applied   int           `json:"applied"`
	BatchTime time.Duration `json:"batch_time_ns,omitempty"`
	// Modes counts the epoch's steps by reduction mode; Evicted lists the
	// ranks evicted in any of them; Staleness is the mean staleness (in
	// steps) of the evicted ranks' gradients folded; ChildSteps counts
	// this rank's iterations at its own pace.
	Modes      map[string]int `json:"modes,omitempty"`
	Evicted    []int          `json:"evicted,omitempty"`
	Staleness  float64        `json:"staleness,omitempty"`
	ChildSteps int            `json:"child_steps,omitempty"`
	// Moved and Helped are, under in-step reassignment, the units of
	// this rank's shares it gave to helpers and the units of others' it
	// computed, over the epoch.
	Moved  int `json:"moved_units,omitempty"`
	Helped int `json:"helped_units,omitempty"`

	lossSum          float64
	lossRows, folded int
	staleSum         float64
}

// add accumulates one step of a batch of rows.
func (e *EpochStats) add(st stepStats, rows int) {
	if st.outcome.Child {
		e.ChildSteps++
		return // the members account for the job's steps
	}
	e.Steps++
	e.Samples += rows
	e.Applied += st.applied
	e.lossSum += st.loss
	e.lossRows += st.applied
	e.StepMean += st.total
	e.ComputeMean += st.compute
	e.PadMean += st.pad
	e.CommMean += st.comm
	if st.outcome.Mode != "" {
		if e.Modes == nil {
			e.Modes = map[string]int{}
		}
		e.Modes[st.outcome.Mode]++
	}
	for _, r := range st.outcome.Evicted {
		if !slices.Contains(e.Evicted, r) {
			e.Evicted = append(e.Evicted, r)
			slices.Sort(e.Evicted)
		}
	}
	e.folded += st.outcome.Folded
	e.Moved += st.outcome.Moved
	e.Helped += st.outcome.Helped
	e.staleSum += st.outcome.Staleness * float64(st.outcome.Folded)
}

// String formats the epoch as rank 0 prints it:
//
//	epoch 3  loss 0.2412  test-acc 95.83%  step 101.2ms  samples/s 632
//
// followed, under a sync that changed modes, by the mode mix, the evicted
// ranks and the staleness: "  evict 14/16 [2] stale 2.4  batch 121.0ms".
func (e EpochStats) String() string {
	s := fmt.Sprintf("epoch %d  loss %.4f  test-acc %.2f%%  step %s  samples/s %.0f",
		e.Epoch, e.Loss, 100*e.TestAccuracy, formatMillis(e.StepMean), e.SamplesPerSec)
	if ev, ov, ex := e.Modes["evict"], e.Modes["overlap"], e.Modes["exclude"]; ev+ov+ex > 0 {
		if ev > 0 {
			s += fmt.Sprintf("  evict %d/%d %v stale %.1f", ev, e.Steps, e.Evicted, e.Staleness)
		}
		if ex > 0 {
			s += fmt.Sprintf("  exclude %d/%d %v", ex, e.Steps, e.Evicted)
		}
		if ov > 0 {
			s += fmt.Sprintf("  overlap %d/%d", ov, e.Steps)
		}
		s += "  batch " + formatMillis(e.BatchTime)
	}
	if e.ChildSteps > 0 {
		s += fmt.Sprintf("  (this rank: %d iterations at its own pace)", e.ChildSteps)
	}
	return s
}

// formatMillis formats d in milliseconds with one decimal.
func formatMillis(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

// Report is what Run returns: the run's shape, every epoch, and totals.
type Report struct {
	// Rank and World are this rank and the world size.
	Rank  int `json:"rank"`
	World int `json:"world"`
	// Params is the number of model parameters.
	Params int `json:"params"`
	// TrainRows and TestRows are the sizes of the two sets.
	TrainRows int `json:"train_rows"`
	TestRows  int `json:"test_rows"`
	// Batch is the global batch size.
	Batch int `json:"batch"`
	// StepCompute is the configured (unslowed) compute per step.
	StepCompute time.Duration `json:"step_compute_ns"`
	// Epochs are the completed epochs, in order.
	Epochs []EpochStats `json:"epochs"`
	// Steps is the number of completed steps.
	Steps int `json:"steps"`
	// TestAccuracy and TestLoss are the last epoch's held-out numbers.
	TestAccuracy float64 `json:"test_accuracy"`
	TestLoss     float64 `json:"test_loss"`
	// StepMean and SamplesPerSec are over every completed step.
	StepMean      time.Duration `json:"step_mean_ns"`
	SamplesPerSec float64       `json:"samples_per_sec"`
	// Wall is the duration of Run.
	Wall time.Duration `json:"wall_ns"`
	// ParamsHash is the FNV-1a hash of the final parameters' bits, in hex.
	ParamsHash string `json:"params_hash"`
	// ParamsIdentical is true when every rank ended with the same hash.
	ParamsIdentical bool `json:"params_identical"`
	// Curve is the held-out accuracy every Config.EvalEvery steps (rank 0,
	// as a member), against the training time: what time to accuracy is
	// read from.
	Curve []EvalPoint `json:"curve,omitempty"`
	// Ranks are every rank's step times and micro-batches (accumulation.go).
	Ranks []RankStats `json:"ranks,omitempty"`
}

// EvalPoint is one evaluation of the held-out set during training.
type EvalPoint struct {
	// Step is the number of steps whose updates the model holds; Epoch
	// the epoch of the last one.
	Step  int `json:"step"`
	Epoch int `json:"epoch"`
	// Seconds is the training time until then on the evaluating rank: its
	// wall time since training began, less the time spent evaluating.
	Seconds float64 `json:"seconds"`
	// TestLoss and TestAccuracy (0..1) are the held-out numbers.
	TestLoss     float64 `json:"test_loss"`
	TestAccuracy float64 `json:"test_accuracy"`
}

// finish fills the totals from the epochs.
func (r *Report) finish(wall time.Duration) {
	r.Wall = wall
	var steps, samples int
	var busy time.Duration
	for _, e := range r.Epochs {
		steps += e.Steps
		samples += e.Samples
		busy += e.StepMean * time.Duration(e.Steps)
	}
	r.Steps = steps
	if steps > 0 {
		r.StepMean = busy / time.Duration(steps)
		r.SamplesPerSec = float64(samples) / busy.Seconds()
	}
	if n := len(r.Epochs); n > 0 {
		r.TestAccuracy, r.TestLoss = r.Epochs[n-1].TestAccuracy, r.Epochs[n-1].TestLoss
	}
}

// Summary is the one line printed after the last epoch.
func (r Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "done: world %d  %d epochs  %d steps  test-acc %.2f%%  step %s  samples/s %.0f  wall %.1fs  params %s",
		r.World, len(r.Epochs), r.Steps, 100*r.TestAccuracy, formatMillis(r.StepMean), r.SamplesPerSec,
		r.Wall.Seconds(), r.ParamsHash)
	if r.ParamsIdentical {
		b.WriteString(" (identical on all ranks)")
	}
	return b.String()
}

// paramsHash is the FNV-1a hash of the parameters' IEEE-754 bits.
func paramsHash(p []float32) uint64 {
	h := fnv.New64a()
	var b [4]byte
	for _, v := range p {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
		h.Write(b[:])
	}
	return h.Sum64()
}
