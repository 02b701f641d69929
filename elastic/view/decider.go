package view

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Typed failures Ready can return; the driver stops the node with them.
var (
	// ErrBelowMinNP: fewer than MinNP live nodes for MinWait.
	ErrBelowMinNP = errors.New("fewer than min-np live nodes for too long")
	// ErrStartTimeout: the job never had MinNP nodes within StartTimeout.
	ErrStartTimeout = errors.New("start-up: fewer than min-np nodes joined in time")
)

// Config configures a Decider. Durations are compared with the now that
// callers pass in; the Decider never reads a clock.
type Config struct {
	// Self is this node's name.
	Self string
	// MinNP is the fewest members a generation may have; MaxNP the most
	// (0: no limit). Nodes beyond MaxNP wait as standbys.
	MinNP, MaxNP int
	// InitialNP is how many nodes the first generation waits for (the
	// start-up barrier; 0: MinNP).
	InitialNP int
	// StartTimeout: after it the first generation starts with at least
	// MinNP nodes, and with fewer the node fails with ErrStartTimeout.
	StartTimeout time.Duration
	// MinWait is how long the job may stay below MinNP live nodes, waiting
	// for joins, before every node fails with ErrBelowMinNP.
	MinWait time.Duration
	// EvidenceTTL is how long a data-plane failure naming a node counts as
	// that node's death when the failure detector still thinks it alive.
	EvidenceTTL time.Duration
	// JoinSettle is how long the proposer waits after the last join before
	// growing the generation (joins arriving together form one generation).
	JoinSettle time.Duration
	// FormTimeout: a view adopted this long ago that has not formed here is
	// treated as failed.
	FormTimeout time.Duration
	// RetryBackoff is the pause before re-proposing the same members after
	// a failure that named nobody (or a view that failed to form), and how
	// long a proposal handed to the driver stays pending.
	RetryBackoff time.Duration
}

// Validate reports every unusable field.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if err := ValidateName(c.Self); err != nil {
		errs = append(errs, err)
	}
	if c.MinNP < 1 {
		bad("min-np %d must be at least 1", c.MinNP)
	}
	if c.MaxNP != 0 && (c.MaxNP < c.MinNP || c.MaxNP > MaxMembers) {
		bad("max-np %d must be 0 (no limit) or in min-np %d..%d", c.MaxNP, c.MinNP, MaxMembers)
	}
	if c.InitialNP != 0 && (c.InitialNP < c.MinNP || (c.MaxNP != 0 && c.InitialNP > c.MaxNP)) {
		bad("initial np %d must be between min-np %d and max-np %d", c.InitialNP, c.MinNP, c.MaxNP)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"start timeout", c.StartTimeout}, {"min wait", c.MinWait}, {"evidence TTL", c.EvidenceTTL},
		{"form timeout", c.FormTimeout}, {"retry backoff", c.RetryBackoff}} {
		if d.v <= 0 {
			bad("%s %v must be positive", d.name, d.v)
		}
	}
	if c.JoinSettle < 0 {
		bad("join settle %v must not be negative", c.JoinSettle)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("view: invalid config: %w", err)
	}
	return nil
}

// Proposal is a view the driver must propose: it adds its rendezvous
// address and itself as proposer, then feeds the View back through Receive
// and sends it to every node.
type Proposal struct {
	Gen     uint64
	Members []string
}

// Ready is what the driver must do now.
type Ready struct {
	// Propose, if set, is a new view to propose.
	Propose *Proposal
	// Fail, if set (once), is why this node must stop.
	Fail error
}

// Decider is one node's membership state machine. It is not safe for
// concurrent use: one goroutine (the driver's loop) owns it.
type Decider struct {
	cfg   Config
	now   time.Time
	start time.Time

	alive    map[string]bool      // the failure detector's live nodes, self included
	evidence map[string]time.Time // data-plane failures naming a node, by when
	// assumed holds members of a received view that the failure detector
	// has not reported yet, by when: the proposer judged them alive, and
	// gossip about a node can arrive after its proposal (a node that
	// joined through one seed learns the others by gossip). They count as
	// alive for EvidenceTTL unless declared dead first.
	assumed map[string]time.Time
	gone    map[string]bool // declared dead: never assumed alive again

	view      View      // the adopted view (Gen 0: none yet)
	adoptedAt time.Time // when view was adopted
	maxGen    uint64    // highest generation seen or proposed

	formed   uint64 // highest generation formed here
	failed   uint64 // highest generation reported failed
	failedAt time.Time

	proposed   uint64 // generation handed to the driver, not yet adopted
	proposedAt time.Time

	lastJoin   time.Time // when a non-member last became alive
	belowSince time.Time // since when fewer than MinNP are live (zero: not below)

	fatal    error
	reported bool // fatal returned by Ready
}

// New returns a Decider for cfg, started at now. Self counts as alive.
func New(cfg Config, now time.Time) (*Decider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.InitialNP == 0 {
		cfg.InitialNP = cfg.MinNP
	}
	if cfg.MaxNP == 0 {
		cfg.MaxNP = MaxMembers
	}
	d := &Decider{cfg: cfg, now: now, start: now, alive: map[string]bool{cfg.Self: true}, evidence: map[string]time.Time{},
		assumed: map[string]time.Time{}, gone: map[string]bool{}}
	return d, nil
}

func (d *Decider) tick(now time.Time) {
	if now.After(d.now) {
		d.now = now
	}
}

// Tick moves time forward.
func (d *Decider) Tick(now time.Time) { d.tick(now) }

// Alive records that the failure detector sees name alive.
func (d *Decider) Alive(name string, now time.Time) {
	d.tick(now)
	if !d.alive[name] && !d.view.Contains(name) {
		d.lastJoin = d.now
	}
	d.alive[name] = true
	delete(d.assumed, name)
	delete(d.gone, name)
}

// Dead records that the failure detector declared name dead (or that it
// left).
func (d *Decider) Dead(name string, now time.Time) {
	d.tick(now)
	if name == d.cfg.Self {
		return
	}
	delete(d.alive, name)
	delete(d.evidence, name)
	delete(d.assumed, name)
	d.gone[name] = true
}

// Evidence records that generation gen's communicator failed naming node
// name as dead (here or on a peer that reported it). It also marks gen
// failed.
//
// Evidence about a generation older than the adopted view is ignored: the
// proposer of the adopted view has already judged its members.
func (d *Decider) Evidence(gen uint64, name string, now time.Time) {
	d.tick(now)
	if gen < d.view.Gen {
		return
	}
	if name != d.cfg.Self && name != "" {
		d.evidence[name] = d.now
	}
	d.Failed(gen, now)
}

// Failed records that generation gen's communicator failed somewhere.
func (d *Decider) Failed(gen uint64, now time.Time) {
	d.tick(now)
	if gen > d.failed {
		d.failed, d.failedAt = gen, d.now
	}
}

// Formed records that this node formed generation gen (its communicator
// is up and the view agreed).
func (d *Decider) Formed(gen uint64, now time.Time) {
	d.tick(now)
	if gen == d.view.Gen && gen > d.formed {
		d.formed = gen
	}
}

// Receive offers a proposal (from a peer, from the driver's own Propose, or
// from a state exchange) and reports whether it was adopted. The caller
// validates v first.
func (d *Decider) Receive(v View, now time.Time) bool {
	d.tick(now)
	d.maxGen = max(d.maxGen, v.Gen)
	if d.view.Gen != 0 && !v.Supersedes(d.view) {
		return false
	}
	d.view = View{Gen: v.Gen, Members: slices.Clone(v.Members), Proposer: v.Proposer, Coord: v.Coord}
	d.adoptedAt = d.now
	for _, m := range v.Members {
		delete(d.evidence, m) // the proposer judged them alive
		if _, ok := d.assumed[m]; !ok && !d.alive[m] && !d.gone[m] {
			d.assumed[m] = d.now
		}
	}
	return true
}

// View returns the adopted view (Gen 0: none yet).
func (d *Decider) View() View { return d.view }

// FormedGen reports the highest generation formed here.
func (d *Decider) FormedGen() uint64 { return d.formed }

func (d *Decider) live(name string) bool {
	if at, ok := d.assumed[name]; ok && d.now.Sub(at) < d.cfg.EvidenceTTL {
		return true
	}
	if !d.alive[name] {
		return false
	}
	t, ok := d.evidence[name]
	return !ok || d.now.Sub(t) >= d.cfg.EvidenceTTL
}

// Live returns the live nodes in name order.
func (d *Decider) Live() []string {
	var out []string
	for _, n := range slices.Sorted(maps.Keys(d.alive)) {
		if d.live(n) {
			out = append(out, n)
		}
	}
	return out
}

// Ready returns what the driver must do now. A returned proposal is
// remembered as pending: it is not proposed again until RetryBackoff
// passes without the driver adopting it.
func (d *Decider) Ready() Ready {
	if d.fatal != nil {
		if d.reported {
			return Ready{}
		}
		d.reported = true
		return Ready{Fail: d.fatal}
	}
	p := d.decide()
	if d.fatal != nil {
		d.reported = true
		return Ready{Fail: d.fatal}
	}
	if p != nil {
		d.proposed, d.proposedAt = p.Gen, d.now
		d.maxGen = max(d.maxGen, p.Gen)
	}
	return Ready{Propose: p}
}

func (d *Decider) pending() bool {
	return d.proposed > d.view.Gen && d.now.Sub(d.proposedAt) < d.cfg.RetryBackoff
}

func (d *Decider) decide() *Proposal {
	c := d.cfg
	if d.view.Gen == 0 {
		cands := d.Live()
		waited := d.now.Sub(d.start) >= c.StartTimeout
		if len(cands) < c.MinNP {
			if waited {
				d.fatal = fmt.Errorf("%w: %d live of min-np %d after %v", ErrStartTimeout, len(cands), c.MinNP, c.StartTimeout)
			}
			return nil
		}
		if cands[0] != c.Self || d.pending() {
			return nil
		}
		if len(cands) >= c.InitialNP || waited {
			return &Proposal{Gen: d.maxGen + 1, Members: cands[:min(len(cands), c.MaxNP)]}
		}
		return nil
	}
	var survivors, joiners []string
	for _, m := range d.view.Members {
		if d.live(m) {
			survivors = append(survivors, m)
		}
	}
	for _, n := range d.Live() {
		if !d.view.Contains(n) {
			joiners = append(joiners, n)
		}
	}
	total := min(len(survivors)+len(joiners), c.MaxNP)
	if total < c.MinNP {
		if d.belowSince.IsZero() {
			d.belowSince = d.now
		}
		if d.now.Sub(d.belowSince) >= c.MinWait {
			d.fatal = fmt.Errorf("%w: %d live of min-np %d for %v", ErrBelowMinNP, total, c.MinNP, c.MinWait)
		}
		return nil
	}
	d.belowSince = time.Time{}
	if len(survivors) == 0 {
		// Every member is gone: the live nodes outside the view start
		// over, led by the smallest name.
		if joiners[0] != c.Self || d.pending() {
			return nil
		}
		return &Proposal{Gen: d.maxGen + 1, Members: slices.Clone(joiners[:total])}
	}
	if survivors[0] != c.Self || d.pending() {
		return nil
	}
	formed := d.formed >= d.view.Gen
	shrink := len(survivors) < len(d.view.Members)
	failed := d.failed >= d.view.Gen
	stuck := !formed && d.now.Sub(d.adoptedAt) >= c.FormTimeout
	grow := formed && len(joiners) > 0 && len(survivors) < c.MaxNP && d.now.Sub(d.lastJoin) >= c.JoinSettle
	switch {
	case shrink, grow:
	case stuck:
	case failed:
		// The communicator broke (or never formed) with nobody known
		// missing: a peer that closed on purpose is usually about to be
		// reported gone, so wait RetryBackoff before re-forming as is.
		if d.now.Sub(d.failedAt) < c.RetryBackoff {
			return nil
		}
	default:
		return nil
	}
	var members []string
	if len(survivors) >= total {
		members = slices.Clone(survivors[:total])
	} else {
		members = append(slices.Clone(survivors), joiners[:total-len(survivors)]...)
	}
	return &Proposal{Gen: d.maxGen + 1, Members: members}
}
