package inject

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Link is a network straggler: how the link of Ranks' host behaves. It is
// not applied by the Injector (which models compute): a test bed applies
// it to the hosts' links (internal/testbed.ApplyLinks), with a rate
// shaper, packet loss and a userspace proxy for delay and stalls; the
// Injector only reports step-triggered stalls (Effect.LinkStall) to
// whoever runs the steps.
//
// Spec syntax, options separated by ':' and in any order:
//
//	link=R[,R...]:rate=50mbit:delay=20ms:jitter=5ms:loss=1%:stall=500ms@step10
//
// rate is bits per second with an optional k, m or g (×1000) before an
// optional "bit" ("50mbit", "1g", "800000"); delay and jitter are Go
// durations, whole milliseconds, jitter ≤ delay; loss is a percentage
// ("1%", "0.5%") or a fraction ("0.01"), below 100%; a stall holds all
// traffic of the link for its duration, starting at a step ("@step10":
// reported by Injector.At for that step) or at a time after the links
// are applied ("@2s").
type Link struct {
	// Ranks are the affected ranks, sorted and distinct. Ranks sharing a
	// host share its link: give them the same options.
	Ranks []int
	// Rate limits the link in bits per second; 0: unlimited.
	Rate int64
	// Delay is added each way; Jitter varies it by ±Jitter.
	Delay, Jitter time.Duration
	// Loss is the fraction of packets dropped each way, in [0, 1).
	Loss float64
	// Stall holds the link for this long (0: no stall), starting at step
	// StallStep (≥ 0), or, when StallStep is -1, StallAt after the links
	// are applied.
	Stall     time.Duration
	StallStep int
	StallAt   time.Duration
}

// maxLinkDuration bounds delays and stalls.
const maxLinkDuration = time.Hour

// validate checks the link's options (not its ranks' bounds).
func (l Link) validate() error {
	bad := func(reason string) error { return &SpecError{Clause: l.clause(), Reason: reason} }
	switch {
	case len(l.Ranks) == 0:
		return bad("no rank")
	case l.Rate < 0 || (l.Rate > 0 && l.Rate < 8000):
		return bad("rate must be at least 8kbit")
	case l.Delay < 0 || l.Jitter < 0 || l.Delay > maxLinkDuration:
		return bad("delay and jitter must be in 0..1h")
	case l.Delay%time.Millisecond != 0 || l.Jitter%time.Millisecond != 0:
		return bad("delay and jitter must be whole milliseconds")
	case l.Jitter > l.Delay:
		return bad("jitter must not exceed the delay")
	case !(l.Loss >= 0 && l.Loss < 1):
		return bad("loss must be in [0%, 100%)")
	case l.Stall < 0 || l.Stall > maxLinkDuration:
		return bad("stall must be in 0..1h")
	case l.Stall > 0 && l.StallStep < 0 && (l.StallStep != -1 || l.StallAt < 0):
		return bad("a stall starts at a step ≥ 0 or a time ≥ 0")
	case l.Rate == 0 && l.Delay == 0 && l.Loss == 0 && l.Stall == 0:
		return bad("no option: want rate, delay, jitter, loss or stall")
	}
	return nil
}

// clause renders the link in the spec syntax.
func (l Link) clause() string {
	parts := []string{"link=" + joinRanks(l.Ranks)}
	if l.Rate > 0 {
		parts = append(parts, "rate="+FormatRate(l.Rate))
	}
	if l.Delay > 0 {
		parts = append(parts, "delay="+l.Delay.String())
	}
	if l.Jitter > 0 {
		parts = append(parts, "jitter="+l.Jitter.String())
	}
	if l.Loss > 0 {
		parts = append(parts, "loss="+formatFloat(l.Loss*100)+"%")
	}
	if l.Stall > 0 {
		at := "@step" + strconv.Itoa(l.StallStep)
		if l.StallStep < 0 {
			at = "@" + l.StallAt.String()
		}
		parts = append(parts, "stall="+l.Stall.String()+at)
	}
	return strings.Join(parts, ":")
}

// FormatRate renders a link rate in bits per second with the largest exact
// suffix, as ParseRate reads it: "1gbit", "100mbit", "1500bit".
func FormatRate(r int64) string {
	for _, u := range []struct {
		s string
		v int64
	}{{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}} {
		if r%u.v == 0 {
			return strconv.FormatInt(r/u.v, 10) + u.s
		}
	}
	return strconv.FormatInt(r, 10) + "bit"
}

// ParseRate parses a link rate: bits per second with an optional k, m or
// g (decimal) before an optional "bit": "50mbit", "1g", "800000".
func ParseRate(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimSuffix(t, "bit")
	mult := 1.0
	switch {
	case strings.HasSuffix(t, "k"):
		mult, t = 1e3, t[:len(t)-1]
	case strings.HasSuffix(t, "m"):
		mult, t = 1e6, t[:len(t)-1]
	case strings.HasSuffix(t, "g"):
		mult, t = 1e9, t[:len(t)-1]
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || v*mult > 1e15 {
		return 0, fmt.Errorf("rate %q: want bits per second such as 50mbit, 1gbit, 800000", s)
	}
	return int64(math.Round(v * mult)), nil
}

// parseLoss parses "1%" or "0.01".
func parseLoss(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(p, 64)
		return v / 100, err
	}
	return strconv.ParseFloat(s, 64)
}

// parseLink parses the value of a link clause: "R[,R]:opt=v[:opt=v...]".
func parseLink(val string) (Link, error) {
	fields := strings.Split(val, ":")
	ranks, err := parseRanks(fields[0])
	if err != nil {
		return Link{}, err
	}
	l := Link{Ranks: ranks, StallStep: -1}
	seen := map[string]bool{}
	for _, opt := range fields[1:] {
		k, v, ok := strings.Cut(strings.TrimSpace(opt), "=")
		if !ok {
			return Link{}, fmt.Errorf("option %q: want name=value", opt)
		}
		if seen[k] {
			return Link{}, fmt.Errorf("option %s given twice", k)
		}
		seen[k] = true
		switch k {
		case "rate":
			l.Rate, err = ParseRate(v)
		case "delay":
			l.Delay, err = time.ParseDuration(v)
		case "jitter":
			l.Jitter, err = time.ParseDuration(v)
		case "loss":
			l.Loss, err = parseLoss(v)
		case "stall":
			d, at, ok := strings.Cut(v, "@")
			if !ok {
				return Link{}, fmt.Errorf("stall %q: want D@stepN or D@T", v)
			}
			if l.Stall, err = time.ParseDuration(d); err != nil {
				break
			}
			if n, isStep := strings.CutPrefix(at, "step"); isStep {
				l.StallStep, err = strconv.Atoi(n)
			} else {
				l.StallAt, err = time.ParseDuration(at)
			}
		default:
			return Link{}, fmt.Errorf("unknown option %q; want rate, delay, jitter, loss or stall", k)
		}
		if err != nil {
			return Link{}, fmt.Errorf("option %s: %w", k, err)
		}
	}
	if len(fields) == 1 {
		return Link{}, fmt.Errorf("no option: want rate, delay, jitter, loss or stall")
	}
	return l, nil
}

// LinkOf returns the link clause that names rank, if any.
func (s Spec) LinkOf(rank int) (Link, bool) {
	for _, l := range s.Links {
		for _, r := range l.Ranks {
			if r == rank {
				return l, true
			}
		}
	}
	return Link{}, false
}
