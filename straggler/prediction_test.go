package straggler

import (
	"fmt"
	"strings"
	"testing"
)

// confusion counts straggler predictions against what happened.
type confusion struct{ tp, fp, fn, tn int }

func (c confusion) fpRate() float64 { return ratio(c.fp, c.fp+c.tn) }
func (c confusion) fnRate() float64 { return ratio(c.fn, c.fn+c.tp) }
func (c confusion) positives() float64 {
	return ratio(c.tp+c.fn, c.tp+c.fn+c.fp+c.tn)
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// scorePrediction runs a Policy over the trace (equal shares, every rank
// computing its share in the trace's arrival time with the trace's CPU
// utilisation) and compares the stragglers each plan predicted for its
// step with the actual ones.
func scorePrediction(t testing.TB, tr trace, kind PredictorKind, warmup int) confusion {
	t.Helper()
	n := tr.cfg.world
	p, err := NewPolicy(Config{World: n, GlobalBatch: 32 * n, Overlap: true, Predictor: kind})
	if err != nil {
		t.Fatal(err)
	}
	var conf confusion
	for s, row := range tr.obs {
		if s >= warmup {
			predicted := make([]bool, n)
			for _, r := range p.Plan().Stragglers {
				predicted[r] = true
			}
			for r, actual := range actualStragglers(row, DefaultThreshold) {
				switch {
				case actual && predicted[r]:
					conf.tp++
				case actual:
					conf.fn++
				case predicted[r]:
					conf.fp++
				default:
					conf.tn++
				}
			}
		}
		rep := Report{Step: s, Current: make([]RankReport, n), Child: make([]ChildReport, n)}
		for r, o := range row {
			rep.Current[r] = RankReport{Present: true, Samples: 32, Compute: o.Arrival, Arrival: o.Arrival, Wait: o.Wait, CPU: o.CPU}
		}
		if _, err := p.Observe(rep); err != nil {
			t.Fatal(err)
		}
	}
	return conf
}

// predictionPatterns are the straggler patterns of straggler/inject the
// FP/FN table covers.
var predictionPatterns = []struct{ name, spec string }{
	{"noise only", ""},
	{"deterministic slow=3:3x", "slow=3:3x"},
	{"persistent=1,5:+40ms", "persistent=1,5:+40ms"},
	{"persistent=2:1.5x", "persistent=2:1.5x"},
	{"flexrr-slow=0.01:100%", "flexrr-slow=0.01:100%"},
	{"flexrr-slow=0.1:100%", "flexrr-slow=0.1:100%"},
	{"powerlaw=11", "powerlaw=11"},
	{"powerlaw=4", "powerlaw=4"},
	{"transient=0.8 (AntDT)", "transient=0.8"},
}

// TestPredictionErrorTable measures the false-positive and false-negative
// rates of straggler prediction for every injection pattern and both
// predictors, prints the table of docs/straggler.md, and holds the
// predictable patterns to low error rates. Regenerate the table with
//
//	go test ./straggler -run TestPredictionErrorTable -v
func TestPredictionErrorTable(t *testing.T) {
	const warmup = 20
	var b strings.Builder
	fmt.Fprintf(&b, "| pattern | actual stragglers | EWMA FP | EWMA FN | RLS FP | RLS FN |\n|---|---|---|---|---|---|\n")
	for _, p := range predictionPatterns {
		tr := makeTrace(t, defaultTrace(p.spec))
		ewma := scorePrediction(t, tr, PredictEWMA, warmup)
		rls := scorePrediction(t, tr, PredictRLS, warmup)
		fmt.Fprintf(&b, "| %s | %.1f%% (%d) | %.1f%% | %.1f%% | %.1f%% | %.1f%% |\n", p.name, 100*ewma.positives(), ewma.tp+ewma.fn,
			100*ewma.fpRate(), 100*ewma.fnRate(), 100*rls.fpRate(), 100*rls.fnRate())
		for kind, c := range map[string]confusion{"ewma": ewma, "rls": rls} {
			switch {
			case p.spec == "" && c.fpRate() > 0.005:
				t.Errorf("%s on noise alone: FP rate %.3f, want < 0.5%%", kind, c.fpRate())
			case strings.HasPrefix(p.spec, "slow=") || strings.HasPrefix(p.spec, "persistent="):
				if c.fpRate() > 0.02 || c.fnRate() > 0.02 {
					t.Errorf("%s on %s: FP %.3f FN %.3f, want both < 2%% for a constant straggler", kind, p.name, c.fpRate(), c.fnRate())
				}
			case strings.HasPrefix(p.spec, "transient="):
				if c.fpRate() > 0.05 || c.fnRate() > 0.10 {
					t.Errorf("%s on %s: FP %.3f FN %.3f, want < 5%% and < 10%% on a duty cycle", kind, p.name, c.fpRate(), c.fnRate())
				}
			}
		}
		// RLS (the telemetry-fed predictor) must not be worse than EWMA.
		if rls.fpRate()+rls.fnRate() > ewma.fpRate()+ewma.fnRate()+0.05 {
			t.Errorf("%s: RLS FP+FN %.3f exceeds EWMA's %.3f", p.name, rls.fpRate()+rls.fnRate(), ewma.fpRate()+ewma.fnRate())
		}
	}
	t.Logf("16 ranks, 600 steps, base 100ms, 3%% noise, warm-up %d steps:\n%s", warmup, b.String())
}
