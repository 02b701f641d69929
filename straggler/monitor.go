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
type Monitor struct {
	cfg   MonitorConfig
	short []window
	long  []window
}

// NewMonitor validates cfg and returns an empty Monitor.
func NewMonitor(cfg MonitorConfig) (*Monitor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Monitor{cfg: cfg, short: make([]window, cfg.World), long: make([]window, cfg.World)}
	// Every rank's windows in one array each, in rank order: a step visits
	// every rank, so at 16,384 ranks their memory is read in sequence.
	short := make([]time.Duration, cfg.World*cfg.ShortWindow)
	long := make([]time.Duration, cfg.World*cfg.LongWindow)
	for r := range m.short {
		m.short[r] = window{buf: short[r*cfg.ShortWindow : (r+1)*cfg.ShortWindow : (r+1)*cfg.ShortWindow]}
		m.long[r] = window{buf: long[r*cfg.LongWindow : (r+1)*cfg.LongWindow : (r+1)*cfg.LongWindow]}
	}
	return m, nil
}

// Observe records rank's arrival time of one step. Ranks outside the world
// are ignored.
func (m *Monitor) Observe(rank int, arrival time.Duration) {
	if rank < 0 || rank >= m.cfg.World {
		return
	}
	m.short[rank].push(arrival)
	m.long[rank].push(arrival)
}

// Means returns rank's short- and long-window mean arrival, and false when
// the rank has no data.
func (m *Monitor) Means(rank int) (short, long time.Duration, ok bool) {
	if rank < 0 || rank >= m.cfg.World {
		return 0, 0, false
	}
	s, ok := m.short[rank].mean()
	l, _ := m.long[rank].mean()
	return s, l, ok
}

// Classify returns the class of every rank, indexed by rank, reusing dst's
// storage when it is large enough. A rank is deterministic when its prior
// says so; otherwise persistent when its long window is full and its mean is
// ≥ λ × the mean over ranks of their long-window means; otherwise transient
// when its short-window mean is ≥ λ × the mean of short-window means;
// otherwise none. Ranks without data are none.
func (m *Monitor) Classify(dst []Class) []Class {
	if cap(dst) < m.cfg.World {
		dst = make([]Class, m.cfg.World)
	}
	dst = dst[:m.cfg.World]
	avgShort, avgLong := m.averages()
	for r := range dst {
		switch {
		case m.cfg.Prior != nil && m.cfg.Prior[r] > 1:
			dst[r] = ClassDeterministic
		case m.long[r].full() && float64(m.long[r].sum) >= m.cfg.Lambda*avgLong*float64(m.long[r].n):
			dst[r] = ClassPersistent
		case m.short[r].n > 0 && float64(m.short[r].sum) >= m.cfg.Lambda*avgShort*float64(m.short[r].n):
			dst[r] = ClassTransient
		default:
			dst[r] = ClassNone
		}
	}
	return dst
}

// averages returns the mean over ranks with data of the short- and
// long-window means, in nanoseconds, visiting ranks in order.
func (m *Monitor) averages() (short, long float64) {
	n := 0
	for r := range m.short {
		if m.short[r].n == 0 {
			continue
		}
		short += float64(m.short[r].sum) / float64(m.short[r].n)
		long += float64(m.long[r].sum) / float64(m.long[r].n)
		n++
	}
	if n == 0 {
		return math.Inf(1), math.Inf(1)
	}
	return short / float64(n), long / float64(n)
}
