package straggler

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Class is a rank's straggler class.
type Class int

const (
	// ClassNone: the rank keeps up.
	ClassNone Class = iota
	// ClassTransient: its short-window mean arrival is ≥ λ × the average
	// (AntDT §VI-A step 3).
	ClassTransient
	// ClassPersistent: its long-window mean arrival is ≥ λ × the average
	// over a full long window (AntDT §VI-A step 4).
	ClassPersistent
	// ClassDeterministic: a static prior says the rank is slower (e.g. an
	// older device model); AntDT's deterministic stragglers.
	ClassDeterministic
)

var classNames = [...]string{"none", "transient", "persistent", "deterministic"}

// String returns the class name.
func (c Class) String() string {
	if c >= 0 && int(c) < len(classNames) {
		return classNames[c]
	}
	return "Class(" + strconv.Itoa(int(c)) + ")"
}

// MarshalText encodes the class as its name (used by Plan dumps).
func (c Class) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// MonitorConfig configures a Monitor.
type MonitorConfig struct {
	// World is the number of ranks.
	World int
	// ShortWindow is L_trans in steps.
	ShortWindow int
	// LongWindow is L_per in steps (≥ ShortWindow).
	LongWindow int
	// Lambda is the slowness ratio λ (> 1).
	Lambda float64
	// Prior is an optional static slowdown per rank (1 = nominal, 2 =
	// twice as slow); a rank with a prior > 1 is ClassDeterministic.
	// nil means no priors; otherwise len(Prior) == World.
	Prior []float64
}

// Validate checks the configuration.
func (c MonitorConfig) Validate() error {
	switch {
	case c.World < 1:
		return fmt.Errorf("monitor: world %d must be ≥ 1: %w", c.World, ErrInvalidConfig)
	case c.ShortWindow < 1 || c.LongWindow < c.ShortWindow:
		return fmt.Errorf("monitor: need 1 ≤ short window (%d) ≤ long window (%d): %w", c.ShortWindow, c.LongWindow, ErrInvalidConfig)
	case !(c.Lambda > 1) || math.IsInf(c.Lambda, 0):
		return fmt.Errorf("monitor: slowness ratio λ=%v must be a finite number > 1: %w", c.Lambda, ErrInvalidConfig)
	case c.Prior != nil && len(c.Prior) != c.World:
		return fmt.Errorf("monitor: %d priors for %d ranks: %w", len(c.Prior), c.World, ErrInvalidConfig)
	}
	for r, p := range c.Prior {
		if !(p > 0) || math.IsInf(p, 0) {
			return fmt.Errorf("monitor: prior of rank %d is %v, want a finite number > 0: %w", r, p, ErrInvalidConfig)
		}
	}
	return nil
}

// Monitor keeps AntDT's short (L_trans) and long (L_per) sliding windows of
// arrival times per rank and classifies ranks with the slowness ratio λ.
//
// Every rank's windows are pushed together, so one count per rank says how
// full both are and where the next arrival goes. The windows' slots are
// stored slot-major (slot i of every rank side by side): the ranks report in
// lockstep, so a step's pushes write one contiguous run of each array
// instead of a cache line per rank — at 16,384 ranks the decision is
// memory-bound.
type Monitor struct {
	cfg MonitorConfig
	// count is the arrivals observed per rank; the next goes to slot
	// count mod the window's length.
	count []int
	// shortSum and longSum are each rank's exact window sums (integer
	// nanoseconds, so a mean never drifts).
	shortSum, longSum []time.Duration
	// short and long are the windows' slots: rank r's slot i is at
	// i·World + r.
	short, long []time.Duration
	// atCount is the count whose slots atShort and atLong are: ranks
	// report in lockstep, so most arrivals of a step share a count, and
	// two divisions per rank would be a good part of a step at 16,384
	// ranks.
	atCount, atShort, atLong int
}

// NewMonitor validates cfg and returns an empty Monitor.
func NewMonitor(cfg MonitorConfig) (*Monitor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := cfg.World
	return &Monitor{cfg: cfg, count: filled(n, 0), shortSum: filled(n, time.Duration(0)), longSum: filled(n, time.Duration(0)),
		short: filled(n*cfg.ShortWindow, time.Duration(0)), long: filled(n*cfg.LongWindow, time.Duration(0))}, nil
}

// Observe records rank's arrival time of one step. Ranks outside the world
// are ignored.
func (m *Monitor) Observe(rank int, arrival time.Duration) {
	if rank < 0 || rank >= m.cfg.World {
		return
	}
	c := m.count[rank]
	if c != m.atCount {
		m.atCount, m.atShort, m.atLong = c, c%m.cfg.ShortWindow, c%m.cfg.LongWindow
	}
	full := c >= m.cfg.ShortWindow
	push(&m.short[m.atShort*m.cfg.World+rank], &m.shortSum[rank], full, arrival)
	full = c >= m.cfg.LongWindow
	push(&m.long[m.atLong*m.cfg.World+rank], &m.longSum[rank], full, arrival)
	m.count[rank] = c + 1
}

// push puts v in a window's slot, taking the value it replaces out of the
// window's sum when the window is full.
func push(slot, sum *time.Duration, full bool, v time.Duration) {
	if full {
		*sum -= *slot
	}
	*slot = v
	*sum += v
}

// held returns how many arrivals of rank its short and long windows hold.
func (m *Monitor) held(rank int) (short, long int) {
	c := m.count[rank]
	return min(c, m.cfg.ShortWindow), min(c, m.cfg.LongWindow)
}

// appendClassed appends to dst every rank whose class is not none, in rank
// order (the plan's Classes). A rank is deterministic when its prior says
// so; otherwise persistent when its long window is full and its mean is ≥
// λ × the mean over ranks of their long-window means; otherwise transient
// when its short-window mean is ≥ λ × the mean of short-window means;
// otherwise none. Ranks without data are none.
func (m *Monitor) appendClassed(dst []RankClass) []RankClass {
	avgShort, avgLong := m.averages()
	for r := range m.count {
		if c := m.class(r, avgShort, avgLong); c != ClassNone {
			dst = append(dst, RankClass{Rank: r, Class: c})
		}
	}
	return dst
}

// class is rank's class given the averages of the windows' means.
func (m *Monitor) class(r int, avgShort, avgLong float64) Class {
	ns, nl := m.held(r)
	switch {
	case m.cfg.Prior != nil && m.cfg.Prior[r] > 1:
		return ClassDeterministic
	case nl == m.cfg.LongWindow && float64(m.longSum[r]) >= m.cfg.Lambda*avgLong*float64(nl):
		return ClassPersistent
	case ns > 0 && float64(m.shortSum[r]) >= m.cfg.Lambda*avgShort*float64(ns):
		return ClassTransient
	}
	return ClassNone
}

// averages returns the mean over ranks with data of the short- and
// long-window means, in nanoseconds, visiting ranks in order.
func (m *Monitor) averages() (short, long float64) {
	n := 0
	for r := range m.count {
		ns, nl := m.held(r)
		if ns == 0 {
			continue
		}
		short += float64(m.shortSum[r]) / float64(ns)
		long += float64(m.longSum[r]) / float64(nl)
		n++
	}
	if n == 0 {
		return math.Inf(1), math.Inf(1)
	}
	return short / float64(n), long / float64(n)
}
