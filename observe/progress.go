package observe

import "time"

// Progress is one point of a training job's progress as its loop knows
// it: where it is, how fast it goes and how well it learns. A loop
// reports one when it has something to say — every epoch, every
// evaluation, every N steps — through a ProgressRecorder (a
// *ringtail.Comm); the dashboard draws the points as the job's training
// curve and its header shows the last one. Usually one rank (rank 0)
// reports: the numbers are the job's, not a rank's.
//
// Loss and Accuracy are NaN (math.NaN()) when not measured at this point
// (an evaluation reports accuracy without a training loss; a step counter
// reports neither); the other fields are 0 when unknown.
type Progress struct {
	// Step is the number of optimizer steps done.
	Step int `json:"step"`
	// Epoch is the number of passes over the training set done; a point
	// within an epoch has a fraction (2.5: half way through the third).
	Epoch float64 `json:"epoch"`
	// Elapsed is the training time so far (0: the recorder's clock since
	// the communicator opened stands for it).
	Elapsed time.Duration `json:"elapsed_ns"`
	// Loss is the training loss, e.g. the mean over the steps since the
	// previous point.
	Loss float64 `json:"loss"`
	// Accuracy is the held-out accuracy, in [0, 1].
	Accuracy float64 `json:"accuracy"`
	// SamplesPerSec is the job's training throughput (global samples a
	// second) since the previous point.
	SamplesPerSec float64 `json:"samples_per_sec"`
	// StepTime is the mean step time since the previous point.
	StepTime time.Duration `json:"step_time_ns"`
}

// ProgressRecorder records a job's progress; *ringtail.Comm implements it
// (a no-op unless the communicator is Observing).
type ProgressRecorder interface {
	RecordProgress(p Progress)
}
