package testbed

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ringtail-ml/ringtail/internal/testbed/control"
	"github.com/ringtail-ml/ringtail/straggler/inject"
)

// ParseLinks parses spec, which may hold only link clauses of the
// injection language (compute stragglers are the job's to inject), and
// validates it for a world of ranks.
func ParseLinks(spec string, world int) (inject.Spec, error) {
	s, err := inject.Parse(spec)
	if err != nil {
		return s, err
	}
	if len(s.Faults)+len(s.Slow)+len(s.Persistent) > 0 || s.SlowWorker != nil || s.PowerLaw != nil || s.Transient != nil {
		return s, errors.New("only link clauses apply to the bed")
	}
	if err := s.Validate(world); err != nil {
		return s, err
	}
	return s, nil
}

// Shaper sets a bed's links from link specs, each replacing the last: what
// scripts/testbed.sh's --links does once, and what a job on the bed asks
// for between runs through the control socket (it implements control.Bed).
// Ranks map to hosts with hostOf over a world of ranks.
type Shaper struct {
	bed    *Bed
	world  int
	hostOf func(rank int) int

	mu      sync.Mutex
	applied *Applied // the last spec's time-triggered stalls
}

var _ control.Bed = (*Shaper)(nil)

// NewShaper returns a Shaper of b for world ranks, rank r on host
// hostOf(r).
func NewShaper(b *Bed, world int, hostOf func(rank int) int) *Shaper {
	return &Shaper{bed: b, world: world, hostOf: hostOf}
}

// SetLinks makes the bed's links those of spec's link clauses (see
// ParseLinks); every host that no clause names gets an unshaped link, and
// the previous spec's pending time-triggered stalls are cancelled. Hosts
// whose link does not change are not touched. As with Bed.SetLink, delay
// and stalls act on connections opened after the host's proxy exists.
func (s *Shaper) SetLinks(ctx context.Context, spec string) error {
	parsed, err := ParseLinks(spec, s.world)
	if err != nil {
		return fmt.Errorf("testbed: links %q: %w", spec, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.applied != nil {
		s.applied.Stop()
		s.applied = nil
	}
	named := map[int]bool{}
	for _, l := range parsed.Links {
		for _, r := range l.Ranks {
			named[s.hostOf(r)] = true
		}
	}
	for h := range s.bed.hosts {
		if !named[h] && s.bed.Link(h) != (Link{}) {
			if err := s.bed.SetLink(ctx, h, Link{}); err != nil {
				return err
			}
		}
	}
	a, err := ApplyLinks(ctx, s.bed, parsed, s.world, s.hostOf)
	if err != nil {
		return err
	}
	s.applied = a
	return nil
}

// Stall holds the link of rank's host for d from now (Bed.Stall).
func (s *Shaper) Stall(rank int, d time.Duration) error {
	if rank < 0 || rank >= s.world {
		return fmt.Errorf("testbed: stall of rank %d, outside 0..%d", rank, s.world-1)
	}
	return s.bed.Stall(s.hostOf(rank), d)
}

// Stop cancels the pending time-triggered stalls of the last spec.
func (s *Shaper) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.applied != nil {
		s.applied.Stop()
	}
}
