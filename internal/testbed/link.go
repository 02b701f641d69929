package testbed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"time"
)

// Link is how one host's link to the bridge behaves, the same in both
// directions. The zero value is an unshaped link.
type Link struct {
	// Rate limits the link, in bits per second (tbf on both ends of the
	// veth); 0: unlimited.
	Rate int64
	// Delay is added to every byte crossing the link, in each direction
	// (so a round trip through it gains 2×Delay); Jitter varies it
	// uniformly by ±Jitter. Both go through the proxy, whole
	// milliseconds.
	Delay, Jitter time.Duration
	// Loss is the fraction of packets dropped in each direction (nftables
	// on the host's eth0), in [0, 1).
	Loss float64
	// Proxy routes the host's TCP connections through the proxy even
	// without delay, so that Stall can act on them. Delay or Jitter imply
	// it.
	Proxy bool
}

// ErrNoProxy is returned by Stall for a host whose link has no proxy.
var ErrNoProxy = errors.New("testbed: the host's link has no proxy (set Link.Proxy, Delay or Jitter before the connections open)")

// Validate checks the link's values.
func (l Link) Validate() error {
	var errs []error
	if l.Rate < 0 || (l.Rate > 0 && l.Rate < 8000) {
		errs = append(errs, fmt.Errorf("rate %d bit/s must be 0 (unlimited) or at least 8000", l.Rate))
	}
	if l.Delay < 0 || l.Jitter < 0 || l.Delay > time.Minute || l.Jitter > time.Minute {
		errs = append(errs, fmt.Errorf("delay %v and jitter %v must be in 0..1m", l.Delay, l.Jitter))
	}
	if l.Jitter > l.Delay {
		errs = append(errs, fmt.Errorf("jitter %v must not exceed the delay %v", l.Jitter, l.Delay))
	}
	if !(l.Loss >= 0 && l.Loss < 1) {
		errs = append(errs, fmt.Errorf("loss %v must be in [0, 1)", l.Loss))
	}
	return errors.Join(errs...)
}

// proxied reports whether the link needs the proxy.
func (l Link) proxied() bool { return l.Proxy || l.Delay > 0 || l.Jitter > 0 }

// Link returns host i's current link.
func (b *Bed) Link(i int) Link {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.links[i]
}

// SetLink makes host i's link behave as l, replacing what was set before.
// Rate and loss apply at once to every packet; the proxy (delay, jitter,
// stalls) applies to TCP connections opened after it is first set up, and
// delay changes to connections opened after the change. Turning the proxy
// off does not remove it: connections already proxied keep flowing through
// it, with no delay.
func (b *Bed) SetLink(ctx context.Context, i int, l Link) error {
	if i < 0 || i >= len(b.hosts) {
		return fmt.Errorf("testbed: no host %d (the bed has %d)", i, len(b.hosts))
	}
	if err := l.Validate(); err != nil {
		return fmt.Errorf("testbed: host %d: %w", i, err)
	}
	h := b.hosts[i]
	if err := b.setRate(ctx, h.Name, "eth0", l.Rate); err != nil {
		return err
	}
	if err := b.setRate(ctx, b.hub, hubPort(i), l.Rate); err != nil {
		return err
	}
	if err := b.setLoss(ctx, h.Name, l.Loss); err != nil {
		return err
	}
	if l.proxied() {
		p, err := b.proxyFor(ctx, i)
		if err != nil {
			return err
		}
		p.setLink(l)
	} else if p := b.proxy(i); p != nil {
		p.setLink(Link{})
	}
	b.mu.Lock()
	b.links[i] = l
	b.mu.Unlock()
	return nil
}

// setRate puts a tbf of rate bit/s (0: none) on dev's egress in ns.
func (b *Bed) setRate(ctx context.Context, ns, dev string, rate int64) error {
	if rate == 0 {
		// Deleting a qdisc that is not there fails; there is nothing to undo then.
		_ = exec.CommandContext(ctx, "tc", "-n", ns, "qdisc", "del", "dev", dev, "root").Run()
		return nil
	}
	// The bucket holds 2 ms at the rate, at least 64 KiB (a GSO packet of
	// the veth); the queue 50 ms at the rate.
	burst := max(rate/8/500, 64<<10)
	limit := max(rate/8/20, 2*burst)
	return b.run(ctx, "tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf",
		"rate", strconv.FormatInt(rate, 10)+"bit", "burst", strconv.FormatInt(burst, 10), "limit", strconv.FormatInt(limit, 10))
}

// lossTable is the nftables table of the loss rules.
const lossTable = "rtbed_loss"

// setLoss drops the fraction loss of the packets crossing ns's eth0, in
// each direction (0: no rule).
func (b *Bed) setLoss(ctx context.Context, ns string, loss float64) error {
	// Delete the table if it is there ("destroy" needs nft ≥ 1.0.8: add
	// an empty one first, then delete it).
	script := "add table ip " + lossTable + "\ndelete table ip " + lossTable + "\n"
	if loss > 0 {
		per := strconv.Itoa(int(math.Round(loss * 1e6)))
		script += "table ip " + lossTable + " {\n" +
			" chain in { type filter hook prerouting priority raw; iifname \"eth0\" numgen random mod 1000000 < " + per + " drop; }\n" +
			" chain out { type filter hook postrouting priority 300; oifname \"eth0\" numgen random mod 1000000 < " + per + " drop; }\n}\n"
	} else if _, err := exec.LookPath("nft"); err != nil {
		return nil // no nft, no loss rules to remove
	}
	return b.runInput(ctx, script, "ip", "netns", "exec", ns, "nft", "-f", "-")
}

// Disconnect takes host i's bridge port down: from then on its packets
// are silently lost in both directions, as if its cable were pulled at
// the switch. Its own eth0 keeps its address and routes.
func (b *Bed) Disconnect(ctx context.Context, i int) error {
	return b.run(ctx, "ip", "-n", b.hub, "link", "set", hubPort(i), "down")
}

// Reconnect undoes Disconnect.
func (b *Bed) Reconnect(ctx context.Context, i int) error {
	return b.run(ctx, "ip", "-n", b.hub, "link", "set", hubPort(i), "up")
}

// Stall holds every byte crossing host i's link, both ways, for d from
// now (nothing is lost; TCP sees a pause). The host's link must have a
// proxy (ErrNoProxy) and only proxied connections stall.
func (b *Bed) Stall(i int, d time.Duration) error {
	p := b.proxy(i)
	if p == nil {
		return fmt.Errorf("testbed: host %d: %w", i, ErrNoProxy)
	}
	p.stall(d)
	return nil
}

// Flip arms host i's proxy to flip one bit of one byte of a ringtail
// data-plane connection, as a faulty or hostile device on the path would:
// the byte after bytes on from now in the first connection (in the
// dialer-to-listener direction, through host i) that carries that many
// more. Only connections opened after the proxy was set up (Link.Proxy)
// pass through it. The returned channel is closed once the byte has been
// flipped; each call arms one flip, replacing one not yet done.
func (b *Bed) Flip(i int, after int64) (<-chan struct{}, error) {
	p := b.proxy(i)
	if p == nil {
		return nil, fmt.Errorf("testbed: host %d: %w", i, ErrNoProxy)
	}
	if after < 0 {
		return nil, fmt.Errorf("testbed: flip %d bytes on", after)
	}
	a := &flipArm{after: after, done: make(chan struct{})}
	p.flip.Store(a)
	return a.done, nil
}

// proxy returns host i's proxy, or nil.
func (b *Bed) proxy(i int) *proxy {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.proxies[i]
}

// proxyFor returns host i's proxy, starting it if needed.
func (b *Bed) proxyFor(ctx context.Context, i int) (*proxy, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errors.New("testbed: bed is closed")
	}
	if p := b.proxies[i]; p != nil {
		return p, nil
	}
	p, err := startProxy(ctx, b, b.hosts[i].Name)
	if err != nil {
		return nil, err
	}
	b.proxies[i] = p
	return p, nil
}
