package inject

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// keys lists the clause keys Parse understands, for error messages.
const keys = "seed, slow, persistent, flexrr-slow, powerlaw, transient, kill, freeze, link"

// Lookup returns the spec to use: flagValue when it is non-empty, otherwise
// the value of EnvVar as returned by getenv (pass os.Getenv). The result is
// parsed but not validated against a world size; New does that.
func Lookup(flagValue string, getenv func(string) string) (Spec, error) {
	s := flagValue
	if s == "" && getenv != nil {
		s = getenv(EnvVar)
	}
	spec, err := Parse(s)
	if err != nil {
		return Spec{}, fmt.Errorf("inject: spec %q: %w", s, err)
	}
	return spec, nil
}

// Parse parses a spec string (see the package documentation for the
// grammar). Clauses are separated by ';'; blanks around clauses and empty
// clauses are ignored, so "" parses to the empty Spec. slow, persistent,
// kill and freeze may repeat; seed, flexrr-slow, powerlaw and transient may
// appear once. Ranges that do not depend on the world size are checked here;
// rank bounds are checked by Spec.Validate. Errors are *SpecError.
func Parse(s string) (Spec, error) {
	var spec Spec
	seedSet := false
	for _, raw := range strings.Split(s, ";") {
		clause := strings.TrimSpace(raw)
		if clause == "" {
			continue
		}
		key, val, ok := strings.Cut(clause, "=")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if !ok || val == "" {
			return Spec{}, &SpecError{Clause: clause, Reason: "want key=value with key one of " + keys}
		}
		bad := func(reason string, err error) error {
			return &SpecError{Clause: clause, Reason: reason, Err: err}
		}
		once := func(set bool) error {
			if set {
				return bad(key+" given twice", nil)
			}
			return nil
		}
		switch key {
		case "seed":
			if err := once(seedSet); err != nil {
				return Spec{}, err
			}
			n, err := strconv.ParseUint(val, 10, 64)
			if err != nil {
				return Spec{}, bad("seed must be a non-negative integer", err)
			}
			spec.Seed, seedSet = n, true
		case "slow":
			ranks, f, err := parseRanksFactor(val)
			if err != nil {
				return Spec{}, bad("want slow=R:Fx, e.g. slow=2:3x", err)
			}
			spec.Slow = append(spec.Slow, Scale{Ranks: ranks, Factor: f})
		case "persistent":
			p, err := parsePersistent(val)
			if err != nil {
				return Spec{}, bad("want persistent=R1,R2:+Dms or persistent=R:Fx", err)
			}
			spec.Persistent = append(spec.Persistent, p)
		case "flexrr-slow":
			if err := once(spec.SlowWorker != nil); err != nil {
				return Spec{}, err
			}
			w, err := parseSlowWorker(val)
			if err != nil {
				return Spec{}, bad("want flexrr-slow=P:D%, e.g. flexrr-slow=0.01:100%", err)
			}
			spec.SlowWorker = &w
		case "powerlaw":
			if err := once(spec.PowerLaw != nil); err != nil {
				return Spec{}, err
			}
			a, err := strconv.ParseFloat(val, 64)
			if err != nil {
				return Spec{}, bad("want powerlaw=ALPHA, e.g. powerlaw=4", err)
			}
			spec.PowerLaw = &PowerLaw{Alpha: a}
		case "transient":
			if err := once(spec.Transient != nil); err != nil {
				return Spec{}, err
			}
			t, err := parseTransient(val)
			if err != nil {
				return Spec{}, bad("want transient=I[:sleep=1500ms|2x][:period=N][:on=N][:frac=F], e.g. transient=0.8", err)
			}
			spec.Transient = &t
		case "kill", "freeze":
			f, err := parseFault(key, val)
			if err != nil {
				return Spec{}, bad("want kill=R@STEP or freeze=R@STEP[:DURATION]", err)
			}
			spec.Faults = append(spec.Faults, f)
		case "link":
			l, err := parseLink(val)
			if err != nil {
				return Spec{}, bad("want link=R:rate=50mbit:delay=20ms:jitter=5ms:loss=1%:stall=500ms@step10 (any of the options)", err)
			}
			spec.Links = append(spec.Links, l)
		default:
			return Spec{}, bad("unknown key "+strconv.Quote(key)+"; want one of "+keys, nil)
		}
	}
	sortFaults(spec.Faults)
	// Range checks that do not need the world size; rank 0 always exists.
	if err := spec.validateParams(); err != nil {
		return Spec{}, err
	}
	return spec, nil
}

// validateParams runs Validate's parameter checks without rank bounds.
func (s Spec) validateParams() error {
	maxRank := 0
	for _, sc := range s.Slow {
		maxRank = max(maxRank, sc.Ranks[len(sc.Ranks)-1])
	}
	for _, p := range s.Persistent {
		maxRank = max(maxRank, p.Ranks[len(p.Ranks)-1])
	}
	for _, f := range s.Faults {
		maxRank = max(maxRank, f.Rank)
	}
	for _, l := range s.Links {
		maxRank = max(maxRank, l.Ranks[len(l.Ranks)-1])
	}
	return s.Validate(maxRank + 1)
}

// parseRanks parses "3" or "1,3,5" into sorted, distinct, non-negative ranks.
func parseRanks(s string) ([]int, error) {
	var ranks []int
	for _, f := range strings.Split(s, ",") {
		r, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("rank %q: %w", f, err)
		}
		if r < 0 {
			return nil, fmt.Errorf("rank %d is negative: %w", r, ErrRankOutOfRange)
		}
		ranks = append(ranks, r)
	}
	sort.Ints(ranks)
	for i := 1; i < len(ranks); i++ {
		if ranks[i] == ranks[i-1] {
			return nil, fmt.Errorf("rank %d listed twice", ranks[i])
		}
	}
	return ranks, nil
}

// parseFactor parses "3x" or "1.5x".
func parseFactor(s string) (float64, error) {
	num, ok := strings.CutSuffix(strings.TrimSpace(s), "x")
	if !ok {
		return 0, fmt.Errorf("factor %q must end in x", s)
	}
	return strconv.ParseFloat(num, 64)
}

func parseRanksFactor(val string) ([]int, float64, error) {
	rs, fs, ok := strings.Cut(val, ":")
	if !ok {
		return nil, 0, fmt.Errorf("missing ':'")
	}
	ranks, err := parseRanks(rs)
	if err != nil {
		return nil, 0, err
	}
	f, err := parseFactor(fs)
	if err != nil {
		return nil, 0, err
	}
	return ranks, f, nil
}

func parsePersistent(val string) (Persistent, error) {
	rs, amount, ok := strings.Cut(val, ":")
	if !ok {
		return Persistent{}, fmt.Errorf("missing ':'")
	}
	ranks, err := parseRanks(rs)
	if err != nil {
		return Persistent{}, err
	}
	amount = strings.TrimSpace(amount)
	if d, ok := strings.CutPrefix(amount, "+"); ok {
		extra, err := time.ParseDuration(d)
		if err != nil {
			return Persistent{}, err
		}
		return Persistent{Ranks: ranks, Extra: extra}, nil
	}
	f, err := parseFactor(amount)
	if err != nil {
		return Persistent{}, err
	}
	return Persistent{Ranks: ranks, Factor: f}, nil
}

func parseSlowWorker(val string) (SlowWorker, error) {
	ps, ds, ok := strings.Cut(val, ":")
	if !ok {
		return SlowWorker{}, fmt.Errorf("missing ':'")
	}
	p, err := strconv.ParseFloat(strings.TrimSpace(ps), 64)
	if err != nil {
		return SlowWorker{}, err
	}
	dnum, ok := strings.CutSuffix(strings.TrimSpace(ds), "%")
	if !ok {
		return SlowWorker{}, fmt.Errorf("delay %q must end in %%", ds)
	}
	d, err := strconv.ParseFloat(dnum, 64)
	if err != nil {
		return SlowWorker{}, err
	}
	return SlowWorker{Prob: p, DelayPercent: d}, nil
}

func parseTransient(val string) (Transient, error) {
	fields := strings.Split(val, ":")
	in, err := strconv.ParseFloat(strings.TrimSpace(fields[0]), 64)
	if err != nil {
		return Transient{}, err
	}
	t := Transient{
		Intensity:   in,
		SleepFactor: DefaultTransientSleepFactor,
		Period:      DefaultTransientPeriod,
		On:          DefaultTransientOn,
		Fraction:    DefaultTransientFraction,
	}
	for _, opt := range fields[1:] {
		k, v, ok := strings.Cut(strings.TrimSpace(opt), "=")
		if !ok {
			return Transient{}, fmt.Errorf("option %q: want name=value", opt)
		}
		switch k {
		case "sleep":
			if strings.HasSuffix(v, "x") {
				f, err := parseFactor(v)
				if err != nil {
					return Transient{}, err
				}
				t.Sleep, t.SleepFactor = 0, f
			} else {
				d, err := time.ParseDuration(v)
				if err != nil {
					return Transient{}, err
				}
				t.Sleep, t.SleepFactor = d, 0
			}
		case "period", "on":
			n, err := strconv.Atoi(v)
			if err != nil {
				return Transient{}, err
			}
			if k == "period" {
				t.Period = n
			} else {
				t.On = n
			}
		case "frac":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return Transient{}, err
			}
			t.Fraction = f
		default:
			return Transient{}, fmt.Errorf("unknown option %q; want sleep, period, on or frac", k)
		}
	}
	return t, nil
}

func parseFault(key, val string) (Fault, error) {
	kind := FaultKill
	if key == "freeze" {
		kind = FaultFreeze
	}
	rs, rest, ok := strings.Cut(val, "@")
	if !ok {
		return Fault{}, fmt.Errorf("missing '@'")
	}
	rank, err := strconv.Atoi(strings.TrimSpace(rs))
	if err != nil {
		return Fault{}, err
	}
	steps, ds, hasDur := strings.Cut(rest, ":")
	step, err := strconv.Atoi(strings.TrimSpace(steps))
	if err != nil {
		return Fault{}, err
	}
	f := Fault{Kind: kind, Rank: rank, Step: step}
	if hasDur {
		if kind == FaultKill {
			return Fault{}, fmt.Errorf("kill takes no duration")
		}
		d, err := time.ParseDuration(strings.TrimSpace(ds))
		if err != nil {
			return Fault{}, err
		}
		f.Freeze = d
	}
	if rank < 0 || step < 0 || f.Freeze < 0 {
		return Fault{}, fmt.Errorf("rank, step and duration must be ≥ 0")
	}
	return f, nil
}
