package straggler_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/ringtail-ml/ringtail/sim"
	. "github.com/ringtail-ml/ringtail/straggler"
	"github.com/ringtail-ml/ringtail/topology"
)

// TestPolicyScripts runs the straggler scenarios of testdata/*.txt: reports
// in, plans out, one script per straggler pattern. Regenerate the expected
// output with
//
//	go test ./straggler -run TestPolicyScripts -rewrite
//
// and read the diff: every change of a plan is a change of behaviour.
//
// Commands:
//
//	policy preset=NAME world=N batch=M [grad-bytes=B] [bandwidth=BPS] [slow=r:BPS ...]
//	       [predictor=ewma|rls] [max-staleness=K]
//	    a new Policy (straggler.Preset); bandwidth is every link's, slow
//	    sets every link of rank r.
//	report [step=N] member=r:samples,compute_ms,arrival_ms[,wait_ms] ...
//	       [child=r:count,samples,compute_ms,cycle_ms,versions ...]
//	    the report of the step the plan governs (default: its step); ranks
//	    without a member entry are absent.
//	observe [costs]
//	    feeds the report and prints the plan of the next step.
//	run steps=N per-sample-ms=t0,t1,... [late-ms=l0,l1,...] [wait-ms=W]
//	    [noise=F seed=S] [delay-ms=d0,d1,...]
//	    N steps simulated (sim.Run, continuing the policy: every rank steps
//	    its straggler.Node) of ranks that compute their share at their
//	    per-sample time (× 1±F noise) after a fixed delay-ms of compute per
//	    step (a slow loader), arrive late-ms after their compute,
//	    and reduce in W; evicted ranks post gradients at their own pace.
//	    One line per plan.
//	plan [costs]
//	    prints the plan in effect.
func TestPolicyScripts(t *testing.T) {
	// testdata/*.txt only: testdata/node holds the Node's own scripts
	// (TestNodeScripts).
	paths, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scripts in testdata: %v", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			s := &script{}
			datadriven.RunTest(t, path, s.do)
		})
	}
}

// script is one scenario's state.
type script struct {
	p      *Policy
	report *Report
}

func (s *script) do(t *testing.T, d *datadriven.TestData) string {
	if d.Cmd != "policy" && s.p == nil {
		d.Fatalf(t, "policy first")
	}
	switch d.Cmd {
	case "policy":
		return s.policy(t, d)
	case "report":
		rep, err := s.parseReport(d)
		if err != nil {
			return "error: " + err.Error()
		}
		s.report = &rep
		return fmt.Sprintf("step %d: %d samples applied", rep.Step, rep.Applied)
	case "observe":
		if s.report == nil {
			d.Fatalf(t, "observe needs a report")
		}
		plan, err := s.p.Observe(*s.report)
		s.report = nil
		if err != nil {
			return "error: " + err.Error()
		}
		return describePlan(plan, d.HasArg("costs"))
	case "plan":
		return describePlan(s.p.Plan(), d.HasArg("costs"))
	case "run":
		return s.run(t, d)
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

func (s *script) policy(t *testing.T, d *datadriven.TestData) string {
	var name string
	var world, batch int
	d.ScanArgs(t, "preset", &name)
	d.ScanArgs(t, "world", &world)
	d.ScanArgs(t, "batch", &batch)
	cfg, err := Preset(name, world, batch)
	if err != nil {
		return "error: " + err.Error()
	}
	d.MaybeScanArgs(t, "grad-bytes", &cfg.GradBytes)
	d.MaybeScanArgs(t, "max-staleness", &cfg.MaxStaleness)
	if d.HasArg("reassign-at") {
		// The caller can reassign in-step (Config.Reassign); the plans say
		// when to.
		cfg.Reassign = true
		d.ScanArgs(t, "reassign-at", &cfg.ReassignAt)
	}
	if d.HasArg("keep-ring") {
		// Every rank stays in the ring, as ringtail-train keeps it under
		// in-step reassignment.
		cfg.Evict, cfg.Exclude = false, false
	}
	if d.HasArg("predictor") {
		var p string
		d.ScanArgs(t, "predictor", &p)
		switch p {
		case "ewma":
			cfg.Predictor = PredictEWMA
		case "rls":
			cfg.Predictor = PredictRLS
		default:
			d.Fatalf(t, "unknown predictor %q", p)
		}
	}
	if d.HasArg("bandwidth") {
		var bw float64
		d.ScanArgs(t, "bandwidth", &bw)
		cfg.Bandwidth = make(topology.Matrix, world)
		for i := range cfg.Bandwidth {
			cfg.Bandwidth[i] = make([]float64, world)
			for j := range cfg.Bandwidth[i] {
				if i != j {
					cfg.Bandwidth[i][j] = bw
				}
			}
		}
		for _, a := range d.CmdArgs {
			if a.Key != "slow" {
				continue
			}
			r, v, ok := strings.Cut(a.SingleVal(t), ":")
			rank, err1 := strconv.Atoi(r)
			slow, err2 := strconv.ParseFloat(v, 64)
			if !ok || err1 != nil || err2 != nil || rank < 0 || rank >= world {
				d.Fatalf(t, "slow=%s: want rank:bytes-per-second", a.SingleVal(t))
			}
			for q := range world {
				if q != rank {
					cfg.Bandwidth[rank][q], cfg.Bandwidth[q][rank] = slow, slow
				}
			}
		}
	}
	p, err := NewPolicy(cfg)
	if err != nil {
		return "error: " + err.Error()
	}
	s.p, s.report = p, nil
	return describePlan(p.Plan(), false)
}

// msArgs parses comma-separated milliseconds.
func msArgs(v string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(v, ",") {
		x, err := strconv.ParseFloat(f, 64)
		if err != nil || x < 0 {
			return nil, fmt.Errorf("%q is not a number of milliseconds", f)
		}
		out = append(out, time.Duration(math.Round(x*float64(time.Millisecond))))
	}
	return out, nil
}

func (s *script) parseReport(d *datadriven.TestData) (Report, error) {
	n := s.p.Config().World
	rep := Report{Step: s.p.Plan().Step, Current: make([]RankReport, n), Child: make([]ChildReport, n)}
	for _, a := range d.CmdArgs {
		if len(a.Vals) != 1 {
			return rep, fmt.Errorf("%s: one value", a.Key)
		}
		v := a.Vals[0]
		if a.Key == "step" {
			var err error
			if rep.Step, err = strconv.Atoi(v); err != nil {
				return rep, err
			}
			continue
		}
		rs, fields, ok := strings.Cut(v, ":")
		r, err := strconv.Atoi(rs)
		if !ok || err != nil || r < 0 || r >= n {
			return rep, fmt.Errorf("%s=%s: want rank:fields with a rank of 0..%d", a.Key, v, n-1)
		}
		f := strings.Split(fields, ",")
		switch a.Key {
		case "member":
			if len(f) < 3 || len(f) > 4 {
				return rep, fmt.Errorf("member=%s: want r:samples,compute_ms,arrival_ms[,wait_ms]", v)
			}
			samples, err := strconv.Atoi(f[0])
			if err != nil {
				return rep, err
			}
			times, err := msArgs(strings.Join(f[1:], ","))
			if err != nil {
				return rep, err
			}
			rr := RankReport{Present: true, Samples: samples, Compute: times[0], Arrival: times[1]}
			if len(times) == 3 {
				rr.Wait = times[2]
			}
			rep.Current[r] = rr
			rep.Applied += samples
		case "child":
			if len(f) != 5 {
				return rep, fmt.Errorf("child=%s: want r:count,samples,compute_ms,cycle_ms,versions", v)
			}
			count, err1 := strconv.Atoi(f[0])
			samples, err2 := strconv.Atoi(f[1])
			versions, err3 := strconv.Atoi(f[4])
			times, err4 := msArgs(f[2] + "," + f[3])
			if err := cmpErr(err1, err2, err3, err4); err != nil {
				return rep, err
			}
			rep.Child[r] = ChildReport{Count: count, Samples: samples, Compute: times[0], Cycle: times[1], Versions: versions}
			rep.Applied += samples
		default:
			return rep, fmt.Errorf("unknown report field %q", a.Key)
		}
	}
	return rep, nil
}

func cmpErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// run simulates steps of a world whose ranks compute at fixed per-sample
// times (sim.Run, continuing the script's policy): members compute their
// share (or until the budget) and arrive late-ms after; an evicted rank
// computes its share at its own pace and its parent folds the gradients
// it finished.
func (s *script) run(t *testing.T, d *datadriven.TestData) string {
	cfg := s.p.Config()
	n := cfg.World
	var steps int
	d.ScanArgs(t, "steps", &steps)
	var arg string
	d.ScanArgs(t, "per-sample-ms", &arg)
	tau, err := msArgs(arg)
	if err != nil || len(tau) != n {
		d.Fatalf(t, "per-sample-ms: want %d times (%v)", n, err)
	}
	w := scriptWork{tau: tau, late: make([]time.Duration, n)}
	if d.HasArg("late-ms") {
		d.ScanArgs(t, "late-ms", &arg)
		if w.late, err = msArgs(arg); err != nil || len(w.late) != n {
			d.Fatalf(t, "late-ms: want %d times (%v)", n, err)
		}
	}
	wait := 5 * time.Millisecond
	if d.HasArg("wait-ms") {
		var ms float64
		d.ScanArgs(t, "wait-ms", &ms)
		wait = time.Duration(ms * float64(time.Millisecond))
	}
	if d.HasArg("delay-ms") {
		d.ScanArgs(t, "delay-ms", &arg)
		if w.delay, err = msArgs(arg); err != nil || len(w.delay) != n {
			d.Fatalf(t, "delay-ms: want %d times (%v)", n, err)
		}
	}
	if d.HasArg("noise") {
		d.ScanArgs(t, "noise", &w.noise)
		d.ScanArgs(t, "seed", &w.seed)
	}
	// A reduction over every rank takes wait: 2(n−1) messages of
	// latency, on links too fast for the bytes to count.
	net := sim.Network{Alpha: wait / time.Duration(max(1, 2*(n-1))), BytesPerSec: 1e18}
	res, err := sim.Run(sim.Config{Ranks: n, Continue: s.p, Steps: steps, GlobalBatch: cfg.GlobalBatch, GradBytes: cfg.GradBytes,
		Network: net, Work: w})
	var b strings.Builder
	for i, p := range res.Plans {
		fmt.Fprintln(&b, summary(p, res.Reports[i]))
	}
	if err != nil {
		fmt.Fprintf(&b, "error: %v\n", err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// scriptWork is run's compute model: rank r computes a sample in tau[r]
// (× 1±noise, drawn per rank and step from seed) after a fixed delay[r]
// (nil: none) and reaches the reduction late[r] after its compute.
type scriptWork struct {
	tau, late, delay []time.Duration
	noise            float64
	seed             uint64
}

func (w scriptWork) delayOf(rank int) time.Duration {
	if w.delay == nil {
		return 0
	}
	return w.delay[rank]
}

func (w scriptWork) perSample(rank, step int) time.Duration {
	if w.noise == 0 {
		return w.tau[rank]
	}
	rng := rand.New(rand.NewPCG(w.seed, uint64(rank)<<32|uint64(step)))
	return time.Duration(float64(w.tau[rank]) * (1 + w.noise*(2*rng.Float64()-1)))
}

func (w scriptWork) Compute(rank, step, samples int) time.Duration {
	return w.delayOf(rank) + time.Duration(samples)*w.perSample(rank, step)
}

func (w scriptWork) Within(rank, step int, budget time.Duration) int {
	return max(0, int((budget-w.delayOf(rank))/max(1, w.perSample(rank, step))))
}

func (w scriptWork) Late(rank, _ int) time.Duration { return w.late[rank] }

// ms renders a duration in milliseconds, to the 10 µs.
func fmtMs(d time.Duration) string {
	return strconv.FormatFloat(math.Round(float64(d)/1e4)/100, 'f', -1, 64) + "ms"
}

func msList(ds []time.Duration) string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = fmtMs(d)
	}
	return strings.Join(out, " ")
}

func ints(v []int) string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = strconv.Itoa(x)
	}
	return strings.Join(out, " ")
}

// summary is one line per plan, for run: the plan and what the step that
// produced it folded from children.
func summary(p Plan, rep Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "step %d: %s", p.Step, p.Mode)
	switch p.Mode {
	case ModeOverlap:
		fmt.Fprintf(&b, " late=%d", p.Late)
	case ModeEvict, ModeExclude:
		var edges []string
		for _, e := range p.Parents {
			must := ""
			if e.Must {
				must = "!"
			}
			edges = append(edges, fmt.Sprintf("%d→%d%s", e.Child, e.Parent, must))
		}
		fmt.Fprintf(&b, " [%s]", strings.Join(edges, " "))
		if p.Mode == ModeEvict {
			fmt.Fprintf(&b, " K=%d", p.Staleness)
		}
	}
	fmt.Fprintf(&b, " shares=[%s]", ints(p.Shares))
	if p.Budget > 0 {
		fmt.Fprintf(&b, " budget=%s", fmtMs(p.Budget))
	}
	b.WriteString(reassignOf(p))
	folded := 0
	for _, c := range rep.Child {
		folded += c.Count
	}
	if folded > 0 {
		fmt.Fprintf(&b, " (folded %d child gradients)", folded)
	}
	return b.String()
}

// describePlan prints a plan for the scripts: what a member executes
// (mode, members, the late rank, children and parents with their Must
// flags, the staleness bound, shares and budget) and what the policy
// predicted; costs adds every mode weighed.
func describePlan(p Plan, costs bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "step %d (decided at %d): %s\n", p.Step, p.DecidedAt, p.Mode)
	fmt.Fprintf(&b, "members: %s\n", ints(p.Members))
	if p.Mode == ModeOverlap {
		fmt.Fprintf(&b, "late: %d\n", p.Late)
	}
	if len(p.Evicted) > 0 {
		var edges []string
		for _, e := range p.Parents {
			s := fmt.Sprintf("%d→%d", e.Child, e.Parent)
			if e.Must {
				s += " must"
			}
			edges = append(edges, s)
		}
		fmt.Fprintf(&b, "evicted: %s\n", ints(p.Evicted))
		fmt.Fprintf(&b, "parents: %s\n", strings.Join(edges, ", "))
		if p.Mode == ModeEvict {
			fmt.Fprintf(&b, "staleness: %d\n", p.Staleness)
			fmt.Fprintf(&b, "wait until: %s\n", fmtMs(p.WaitUntil))
		}
	}
	fmt.Fprintf(&b, "shares: %s\n", ints(p.Shares))
	if p.Budget > 0 {
		fmt.Fprintf(&b, "budget: %s\n", fmtMs(p.Budget))
	}
	if r := reassignOf(p); r != "" {
		fmt.Fprintf(&b, "in-step:%s\n", r)
	}
	if slices.ContainsFunc(p.PerSample, func(d time.Duration) bool { return d > 0 }) {
		fmt.Fprintf(&b, "per sample: %s\n", msList(p.PerSample))
		fmt.Fprintf(&b, "predicted: %s\n", msList(p.Predicted))
	}
	if len(p.Stragglers) > 0 {
		fmt.Fprintf(&b, "stragglers: %s\n", ints(p.Stragglers))
	}
	if len(p.Classes) > 0 {
		var cs []string
		for _, c := range p.Classes {
			cs = append(cs, fmt.Sprintf("%d=%s", c.Rank, c.Class))
		}
		fmt.Fprintf(&b, "classes: %s\n", strings.Join(cs, " "))
	}
	if costs {
		for _, c := range p.Costs {
			what := c.Mode.String()
			switch c.Mode {
			case ModeOverlap:
				what += fmt.Sprintf(" late=%d", c.Late)
			case ModeEvict, ModeExclude:
				what += fmt.Sprintf(" [%s]", ints(c.Evicted))
			}
			fmt.Fprintf(&b, "cost: %s time=%s samples=%.1f cost=%.4f\n", what, fmtMs(c.Time), c.Samples, c.Cost)
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// reassignOf prints whether p reassigns within its step and the surprise
// it decided on ("" for a policy that is not told its caller can).
func reassignOf(p Plan) string {
	out := ""
	if p.Reassign {
		out = " reassign"
	}
	if p.Surprise > 0 {
		out += fmt.Sprintf(" surprise=%.3f", p.Surprise)
	}
	return out
}
