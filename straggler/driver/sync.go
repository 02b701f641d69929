package driver

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/straggler/driver/policy"
)

// Sync adapts a Driver to a training loop that owns one gradient buffer and
// splits each global batch by rows: it implements examples/train's
// GradientSync (Open, Share, Reduce, Flush) without either package
// importing the other. The driver is created by Open, once the buffer size
// is known. Like the Driver, it is owned by the training goroutine.
type Sync struct {
	comm   Comm
	pol    policy.Config
	logger zerolog.Logger
	d      *Driver
}

// NewSync returns a Sync that will run the policy pol over comm.
func NewSync(comm Comm, pol policy.Config, logger zerolog.Logger) *Sync {
	return &Sync{comm: comm, pol: pol, logger: logger}
}

// Open creates the driver for a buffer of n float32s and returns it.
func (s *Sync) Open(n int) ([]float32, error) {
	if s.d != nil {
		return nil, fmt.Errorf("driver: sync opened twice")
	}
	d, err := New(Config{Comm: s.comm, Payload: n, Policy: s.pol, Logger: s.logger})
	if err != nil {
		return nil, err
	}
	s.d = d
	return d.Buffer(), nil
}

// Share returns this rank's rows of a batch of the given size under the
// next step's plan (ShareRange).
func (s *Sync) Share(rows int) (lo, hi int) {
	return policy.ShareRange(s.d.Plan().Shares, rows, s.comm.Rank())
}

// Reduce runs one Step and returns the rows applied.
func (s *Sync) Reduce(ctx context.Context, rows int, compute, arrival time.Duration) (int, error) {
	res, err := s.d.Step(ctx, StepInput{Samples: rows, Compute: compute, Arrival: arrival})
	return res.Applied, err
}

// Flush runs the driver's Flush and returns the rows applied.
func (s *Sync) Flush(ctx context.Context) (int, error) {
	res, err := s.d.Flush(ctx)
	return res.Applied, err
}

// Driver returns the driver (nil before Open).
func (s *Sync) Driver() *Driver { return s.d }

// Close releases the driver's held contributions.
func (s *Sync) Close() {
	if s.d != nil {
		s.d.Close()
	}
}
