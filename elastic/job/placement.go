package job

import (
	"maps"
	"slices"

	"github.com/ringtail-ml/ringtail/internal/launch"
)

// placement decides which hosts run ranks. It is pure: Run's loop feeds
// it what happened and carries out what Actions returns.
//
// Rules: discovered hosts are used in the order the discovery lists them,
// each with all its slots, until MaxNP ranks are placed (the last host
// used may get fewer). A host in use keeps the slot count it started with
// until it is stopped. A host whose rank crashed is blacklisted: its
// ranks are stopped and it gets none until discovery stops listing it
// (the blacklist entry is then forgotten, so a host that comes back is
// used again). Hosts discovery no longer lists are stopped. Once the job
// finished, nothing starts.
type placement struct {
	maxNP      int
	discovered []launch.HostSlots
	inUse      map[string]int  // host → slots of its supervisor, running or stopping
	stopping   map[string]bool // supervisors told to stop, not yet ended
	blacklist  map[string]bool
	finished   bool
}

func newPlacement(maxNP int) *placement {
	return &placement{maxNP: maxNP, inUse: map[string]int{}, stopping: map[string]bool{}, blacklist: map[string]bool{}}
}

// discover replaces the discovered hosts. Blacklisted hosts that are no
// longer listed leave the blacklist.
func (p *placement) discover(hosts []launch.HostSlots) {
	p.discovered = slices.Clone(hosts)
	for h := range p.blacklist {
		if !p.listed(h) {
			delete(p.blacklist, h)
		}
	}
}

func (p *placement) listed(host string) bool {
	return slices.ContainsFunc(p.discovered, func(h launch.HostSlots) bool { return h.Host == host })
}

// crashed blacklists host: a rank of it failed without restart.
func (p *placement) crashed(host string) { p.blacklist[host] = true }

// ended records that host's supervisor returned.
func (p *placement) ended(host string) {
	delete(p.inUse, host)
	delete(p.stopping, host)
}

// finish records that the job finished: nothing starts any more.
func (p *placement) finish() { p.finished = true }

// active reports whether any supervisor runs (stopping ones included).
func (p *placement) active() bool { return len(p.inUse) > 0 }

// actions returns the hosts to start (with their slots) and the hosts to
// stop, in a deterministic order, and records them as started and
// stopping.
func (p *placement) actions() (start []launch.HostSlots, stop []string) {
	for _, h := range slices.Sorted(maps.Keys(p.inUse)) {
		if !p.stopping[h] && (!p.listed(h) || p.blacklist[h]) {
			p.stopping[h] = true
			stop = append(stop, h)
		}
	}
	if p.finished {
		return nil, stop
	}
	free := p.maxNP
	for _, s := range p.inUse { // stopping hosts' ranks still count until they end
		free -= s
	}
	for _, h := range p.discovered {
		if free <= 0 {
			break
		}
		if _, ok := p.inUse[h.Host]; ok || p.blacklist[h.Host] {
			continue
		}
		n := min(h.Slots, free)
		free -= n
		p.inUse[h.Host] = n
		start = append(start, launch.HostSlots{Host: h.Host, Slots: n})
	}
	return start, stop
}
