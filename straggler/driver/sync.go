package driver

import (
	"context"
	"fmt"
	"time"

	"github.com/ringtail-ml/ringtail/straggler"
)

// Sync adapts a Driver to a training loop that owns one gradient buffer
// and its state and splits each global batch by rows: with an Outcome
// method (cmd/ringtail-train adds one) it implements examples/train's
// GradientSync, without either package importing the other. The driver is created by Open, once the buffer size is known.
// Like the Driver, it is owned by the training goroutine.
type Sync struct {
	cfg  Config
	d    *Driver
	last Result
}

// NewSync returns a Sync that will run a Driver configured by cfg (its
// Payload is set by Open).
func NewSync(cfg Config) *Sync { return &Sync{cfg: cfg} }

// Open creates the driver for a buffer of n float32s (probing the links
// if so configured: every rank must call it) and returns the buffer.
func (s *Sync) Open(ctx context.Context, n int) ([]float32, error) {
	if s.d != nil {
		return nil, fmt.Errorf("driver: sync opened twice")
	}
	cfg := s.cfg
	// The buffer is the gradient, then one slot for the loss sum
	// (examples/train's GradientSync).
	cfg.Payload, cfg.Gradient = n, max(0, n-1)
	d, err := New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s.d = d
	return d.Buffer(), nil
}

// SetState registers the training state (parameters first, then the
// optimizer's): a rank computing as a child gets fresh parameters through
// it, and the whole state when it rejoins or training ends.
func (s *Sync) SetState(parts ...[]float32) { s.d.SetState(parts...) }

// Next returns the step whose batch the next iteration computes.
func (s *Sync) Next() int { return s.d.Next() }

// Share returns this rank's rows [lo, hi) of a batch of the given size
// under the current plan.
func (s *Sync) Share(rows int) (lo, hi int) {
	return straggler.ShareRange(s.d.Plan().Shares, rows, s.cfg.Comm.Rank())
}

// Reduce runs one Step: it returns the rows whose gradients the buffer
// now holds (0 for a rank computing as a child), whether the state was
// replaced, and whether training is over for this rank.
func (s *Sync) Reduce(ctx context.Context, rows int, compute, arrival time.Duration) (applied int, replaced, done bool, err error) {
	res, err := s.d.Step(ctx, StepInput{Samples: rows, Compute: compute, Arrival: arrival})
	s.last = res
	return res.Applied, res.StateReplaced, res.Done, err
}

// CanReassign reports whether the next step can run under Reassign.
func (s *Sync) CanReassign() bool { return s.d.CanReassign() }

// Reassign runs the next step's compute with in-step work reassignment
// (Driver.Reassign); then call Reduce with the output's Samples.
func (s *Sync) Reassign(ctx context.Context, in ReassignInput) (ReassignOutput, error) {
	return s.d.Reassign(ctx, in)
}

// Last returns the Result of the last Reduce.
func (s *Sync) Last() Result { return s.last }

// Flush runs the driver's Flush and returns the rows applied.
func (s *Sync) Flush(ctx context.Context) (int, error) {
	res, err := s.d.Flush(ctx)
	return res.Applied, err
}

// Driver returns the driver (nil before Open).
func (s *Sync) Driver() *Driver { return s.d }
