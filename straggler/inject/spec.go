package inject

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// EnvVar is the environment variable read when no spec flag is given.
const EnvVar = "RINGTAIL_INJECT"

// ErrRankOutOfRange is wrapped by [Spec.Validate] when a clause names a rank
// that does not exist in the world.
var ErrRankOutOfRange = errors.New("rank out of range")

// SpecError reports a clause of a spec string that could not be parsed or
// validated.
type SpecError struct {
	// Clause is the offending clause as written, e.g. "slow=2:0.5x".
	Clause string
	// Reason says what is wrong and what is expected.
	Reason string
	// Err is an underlying error, if any (a strconv error, ErrRankOutOfRange).
	Err error
}

// Error implements error.
func (e *SpecError) Error() string {
	msg := fmt.Sprintf("inject: clause %q: %s", e.Clause, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the underlying error.
func (e *SpecError) Unwrap() error { return e.Err }

// Spec is a parsed injection spec. The zero value injects nothing.
type Spec struct {
	// Seed seeds every random pattern.
	Seed uint64
	// Slow lists deterministic slow ranks (a slower device model).
	Slow []Scale
	// Persistent lists AntDT persistent stragglers (long-term contention).
	Persistent []Persistent
	// SlowWorker is the FlexRR slow-worker pattern, or nil.
	SlowWorker *SlowWorker
	// PowerLaw is the FlexRR power-law pattern, or nil.
	PowerLaw *PowerLaw
	// Transient is the AntDT transient pattern, or nil.
	Transient *Transient
	// Faults lists kill and freeze faults, sorted by (step, rank).
	Faults []Fault
	// Links lists network stragglers (see Link), in spec order; no rank
	// is in two of them.
	Links []Link
}

// Scale multiplies the compute duration of Ranks by Factor (≥ 1).
type Scale struct {
	// Ranks are the affected ranks, sorted and distinct.
	Ranks []int
	// Factor is the compute multiplier, ≥ 1.
	Factor float64
}

// Persistent is a constant slowdown of Ranks on every step: either an extra
// delay (Extra > 0) or a multiplier (Factor > 1), never both.
type Persistent struct {
	// Ranks are the affected ranks, sorted and distinct.
	Ranks []int
	// Extra is added to every step's compute when non-zero.
	Extra time.Duration
	// Factor multiplies every step's compute when non-zero.
	Factor float64
}

// FaultKind says what a fault does to its rank.
type FaultKind int

const (
	// FaultNone is the absence of a fault.
	FaultNone FaultKind = iota
	// FaultKill makes the rank exit the process with a non-zero code.
	FaultKill
	// FaultFreeze makes the rank stop (SIGSTOP) for a duration.
	FaultFreeze
)

// String returns "none", "kill" or "freeze".
func (k FaultKind) String() string {
	switch k {
	case FaultNone:
		return "none"
	case FaultKill:
		return "kill"
	case FaultFreeze:
		return "freeze"
	}
	return "FaultKind(" + strconv.Itoa(int(k)) + ")"
}

// Fault is a kill or freeze of Rank at Step.
type Fault struct {
	// Kind is FaultKill or FaultFreeze.
	Kind FaultKind
	// Rank is the affected rank.
	Rank int
	// Step is the step at which the fault fires (before that step's compute
	// is padded).
	Step int
	// Freeze is how long a freeze lasts; 0 means until someone else sends
	// SIGCONT. Unused for kills.
	Freeze time.Duration
}

// Validate checks s against a world of the given size: every named rank
// must lie in [0, world) and every parameter in its documented range.
// Errors are *SpecError; rank errors wrap ErrRankOutOfRange.
func (s Spec) Validate(world int) error {
	if world < 1 {
		return fmt.Errorf("inject: world size %d must be ≥ 1", world)
	}
	checkRanks := func(clause string, ranks []int) error {
		for _, r := range ranks {
			if r < 0 || r >= world {
				return &SpecError{Clause: clause, Reason: fmt.Sprintf("rank %d not in [0,%d)", r, world), Err: ErrRankOutOfRange}
			}
		}
		return nil
	}
	for _, sc := range s.Slow {
		if err := checkRanks(sc.clause(), sc.Ranks); err != nil {
			return err
		}
		if !(sc.Factor >= 1) || math.IsInf(sc.Factor, 0) {
			return &SpecError{Clause: sc.clause(), Reason: "factor must be a finite number ≥ 1"}
		}
	}
	for _, p := range s.Persistent {
		if err := checkRanks(p.clause(), p.Ranks); err != nil {
			return err
		}
		if (p.Extra > 0) == (p.Factor != 0) {
			return &SpecError{Clause: p.clause(), Reason: "exactly one of +delay or factor must be set"}
		}
		if p.Extra < 0 || (p.Factor != 0 && (!(p.Factor >= 1) || math.IsInf(p.Factor, 0))) {
			return &SpecError{Clause: p.clause(), Reason: "delay must be > 0 and factor a finite number ≥ 1"}
		}
	}
	if w := s.SlowWorker; w != nil {
		if err := w.validate(); err != nil {
			return err
		}
	}
	if p := s.PowerLaw; p != nil {
		if err := p.validate(); err != nil {
			return err
		}
	}
	if t := s.Transient; t != nil {
		if err := t.validate(); err != nil {
			return err
		}
	}
	linked := map[int]bool{}
	for _, l := range s.Links {
		if err := checkRanks(l.clause(), l.Ranks); err != nil {
			return err
		}
		if err := l.validate(); err != nil {
			return err
		}
		for _, r := range l.Ranks {
			if linked[r] {
				return &SpecError{Clause: l.clause(), Reason: fmt.Sprintf("rank %d is in two link clauses", r)}
			}
			linked[r] = true
		}
	}
	seen := map[[2]int]bool{}
	for _, f := range s.Faults {
		if err := checkRanks(f.clause(), []int{f.Rank}); err != nil {
			return err
		}
		if f.Kind != FaultKill && f.Kind != FaultFreeze {
			return &SpecError{Clause: f.clause(), Reason: "unknown fault kind"}
		}
		if f.Step < 0 || f.Freeze < 0 {
			return &SpecError{Clause: f.clause(), Reason: "step and freeze duration must be ≥ 0"}
		}
		key := [2]int{f.Rank, f.Step}
		if seen[key] {
			return &SpecError{Clause: f.clause(), Reason: "two faults for the same rank and step"}
		}
		seen[key] = true
	}
	return nil
}

// String returns the canonical spec string; Parse(s.String()) yields a Spec
// equal to s.
func (s Spec) String() string {
	var parts []string
	if s.Seed != 0 {
		parts = append(parts, "seed="+strconv.FormatUint(s.Seed, 10))
	}
	for _, sc := range s.Slow {
		parts = append(parts, sc.clause())
	}
	for _, p := range s.Persistent {
		parts = append(parts, p.clause())
	}
	if s.SlowWorker != nil {
		parts = append(parts, s.SlowWorker.clause())
	}
	if s.PowerLaw != nil {
		parts = append(parts, s.PowerLaw.clause())
	}
	if s.Transient != nil {
		parts = append(parts, s.Transient.clause())
	}
	for _, f := range s.Faults {
		parts = append(parts, f.clause())
	}
	for _, l := range s.Links {
		parts = append(parts, l.clause())
	}
	return strings.Join(parts, ";")
}

func (sc Scale) clause() string {
	return "slow=" + joinRanks(sc.Ranks) + ":" + formatFloat(sc.Factor) + "x"
}

func (p Persistent) clause() string {
	if p.Factor != 0 {
		return "persistent=" + joinRanks(p.Ranks) + ":" + formatFloat(p.Factor) + "x"
	}
	return "persistent=" + joinRanks(p.Ranks) + ":+" + p.Extra.String()
}

func (f Fault) clause() string {
	base := f.Kind.String() + "=" + strconv.Itoa(f.Rank) + "@" + strconv.Itoa(f.Step)
	if f.Kind == FaultFreeze && f.Freeze > 0 {
		base += ":" + f.Freeze.String()
	}
	return base
}

func joinRanks(ranks []int) string {
	s := make([]string, len(ranks))
	for i, r := range ranks {
		s[i] = strconv.Itoa(r)
	}
	return strings.Join(s, ",")
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func sortFaults(fs []Fault) {
	sort.SliceStable(fs, func(i, j int) bool {
		if fs[i].Step != fs[j].Step {
			return fs[i].Step < fs[j].Step
		}
		return fs[i].Rank < fs[j].Rank
	})
}
