package testbed

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ringtail-ml/ringtail/straggler/inject"
)

// Applied is the handle of ApplyLinks: Stop cancels the time-triggered
// stalls that have not started yet.
type Applied struct {
	stopOnce sync.Once
	timers   []*time.Timer
}

// Stop cancels the pending time-triggered stalls. It is idempotent.
func (a *Applied) Stop() {
	a.stopOnce.Do(func() {
		for _, t := range a.timers {
			t.Stop()
		}
	})
}

// LinkOf converts a spec's link clause to a bed Link. A link with a stall
// gets the proxy, so the stall can act.
func LinkOf(l inject.Link) Link {
	return Link{Rate: l.Rate, Delay: l.Delay, Jitter: l.Jitter, Loss: l.Loss, Proxy: l.Stall > 0}
}

// ApplyLinks applies the link clauses of spec (a spec parsed from the
// injection language, validated for world ranks) to the bed: each
// clause's rate, delay, jitter and loss become the Link of the hosts of
// its ranks (hostOf maps a rank to a host index: rank r on host r when
// each host has one slot), and its time-triggered stall ("@2s") is
// scheduled from now. Step-triggered stalls ("@step10") are reported by
// the spec's Injector (Effect.LinkStall): the runner calls Bed.Stall.
// Apply before the job starts: only connections opened after a host's
// proxy exists are delayed or stalled. Two ranks on one host must not
// ask for different links.
func ApplyLinks(ctx context.Context, b *Bed, spec inject.Spec, world int, hostOf func(rank int) int) (*Applied, error) {
	if err := spec.Validate(world); err != nil {
		return nil, err
	}
	byHost := map[int]inject.Link{}
	for _, l := range spec.Links {
		for _, r := range l.Ranks {
			h := hostOf(r)
			if h < 0 || h >= len(b.hosts) {
				return nil, fmt.Errorf("testbed: rank %d is on host %d, not on the bed's %d hosts", r, h, len(b.hosts))
			}
			if prev, ok := byHost[h]; ok && LinkOf(prev) != LinkOf(l) {
				return nil, fmt.Errorf("testbed: host %d holds ranks of two different link clauses", h)
			}
			byHost[h] = l
		}
	}
	a := &Applied{}
	for h, l := range byHost {
		if err := b.SetLink(ctx, h, LinkOf(l)); err != nil {
			return nil, err
		}
		if l.Stall > 0 && l.StallStep < 0 {
			a.timers = append(a.timers, time.AfterFunc(l.StallAt, func() { _ = b.Stall(h, l.Stall) }))
		}
	}
	return a, nil
}
