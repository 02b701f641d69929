package coded

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/gradcode"
)

// Errors returned by Coder; they are wrapped with detail.
var (
	// ErrConfig reports an invalid Config.
	ErrConfig = errors.New("coded: invalid config")
	// ErrTooManyDead reports that fewer than n−s ranks are alive.
	ErrTooManyDead = errors.New("coded: more than s ranks are dead")
	// ErrShape reports a buffer of the wrong length.
	ErrShape = errors.New("coded: wrong buffer length")
)

// Messenger is the part of *ringtail.Comm the coded allreduce uses; tests
// may substitute another implementation.
type Messenger interface {
	Rank() int
	Size() int
	Dead() []int
	// Left lists the ranks of Dead that closed their communicator
	// cleanly (they finished and left).
	Left() []int
	Contribute(ctx context.Context, peer int, buf ringtail.Buffer, tag uint32) error
	NextContribution(ctx context.Context, from []int) (*ringtail.Contribution, error)
	// TryContribution takes, without waiting, an arrived contribution from
	// rank from whose tag matches tag under mask.
	TryContribution(from int, tag, mask uint32) (*ringtail.Contribution, bool)
}

var _ Messenger = (*ringtail.Comm)(nil)

// ThroughputSource supplies per-rank throughputs (partitions per second) for
// replanning. It must return the same values on every rank at the same step
// (for example telemetry agreed by an allreduce), or ranks would build
// different plans.
type ThroughputSource interface {
	Throughputs() []float64
}

// Static is a fixed ThroughputSource.
type Static []float64

// Throughputs returns a copy of s.
func (s Static) Throughputs() []float64 { return slices.Clone(s) }

// ComputeFunc computes the gradients of the partitions parts (indices into
// the plan's k partitions) for step, writing partition parts[t]'s gradient
// into grads[t] (each of the Config's Len). It must return promptly once ctx
// ends (the step completed without this rank, or timed out).
type ComputeFunc func(ctx context.Context, step int, k int, parts []int, grads [][]float64) error

// Config configures a Coder. Every rank must use the same Config.
type Config struct {
	// Scheme is gradcode.Cyclic, Hetero or Group.
	Scheme gradcode.Scheme
	// S is the number of stragglers tolerated per step.
	S int
	// K is the number of partitions (0: the plan's default).
	K int
	// Len is the number of gradient elements.
	Len int
	// Seed drives the plan's random choices.
	Seed int64
	// PayloadDType forces the payload type ("" lets the plan choose).
	PayloadDType gradcode.DType
	// Throughputs feeds the plan; nil means equal throughputs.
	Throughputs ThroughputSource
	// ReplanEvery rebuilds the plan from Throughputs at every step that is a
	// positive multiple of it; 0 never replans.
	ReplanEvery int
	// StepTimeout bounds one Step (0: 30 s).
	StepTimeout time.Duration
	// Poll is how often the list of dead ranks is checked for a leader
	// change (0: 10 ms).
	Poll time.Duration
	// History is how many past sums are kept to answer ranks that missed one
	// because its leader died (0: 8).
	History int
}

// Validate reports whether c is usable for a world of n ranks. Errors wrap
// ErrConfig.
func (c Config) Validate(n int) error {
	if c.Len < 1 {
		return fmt.Errorf("%w: Len = %d, want ≥ 1", ErrConfig, c.Len)
	}
	if c.ReplanEvery < 0 || c.StepTimeout < 0 || c.Poll < 0 || c.History < 0 {
		return fmt.Errorf("%w: negative ReplanEvery, StepTimeout, Poll or History", ErrConfig)
	}
	if n < 1 {
		return fmt.Errorf("%w: world of %d ranks", ErrConfig, n)
	}
	return nil
}

func (c Config) planConfig(n int, thr []float64) gradcode.Config {
	return gradcode.Config{Scheme: c.Scheme, N: n, S: c.S, K: c.K, Throughputs: thr, Seed: c.Seed, PayloadDType: c.PayloadDType}
}

func (c Config) withDefaults() Config {
	if c.StepTimeout == 0 {
		c.StepTimeout = 30 * time.Second
	}
	if c.Poll == 0 {
		c.Poll = 10 * time.Millisecond
	}
	if c.History == 0 {
		c.History = 8
	}
	return c
}
