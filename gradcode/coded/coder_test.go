package coded

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/gradcode"
	"github.com/ringtail-ml/ringtail/internal/commtest"
)

func freePort(t testing.TB) int { return commtest.FreePort(t) }

// startComms creates n tolerant communicators in this process over real
// sockets.
func startComms(t testing.TB, n int) []*ringtail.Comm {
	return commtest.Start(t, n, func(c *ringtail.Config) {
		c.TolerateDeaths = true
		c.PeerTimeout = 2 * time.Second
	})
}

// partGrad is the deterministic gradient of partition j of k at step.
func partGrad(step, k, j, e int) float64 {
	return math.Sin(float64(step*7919+j*104729+e)) + float64(j+1)/float64(k)
}

// referenceSum is the uncoded gradient sum over all k partitions.
func referenceSum(step, k, m int) []float64 {
	out := make([]float64, m)
	for j := 0; j < k; j++ {
		for e := range out {
			out[e] += partGrad(step, k, j, e)
		}
	}
	return out
}

// exactCompute fills partition gradients, after sleeping delay(step) (ctx-aware).
func exactCompute(delay func(step int) time.Duration) ComputeFunc {
	return func(ctx context.Context, step, k int, parts []int, grads [][]float64) error {
		if d := delay(step); d > 0 {
			if err := ringtail.Sleep(ctx, d); err != nil {
				return err
			}
		}
		for t, j := range parts {
			for e := range grads[t] {
				grads[t][e] = partGrad(step, k, j, e)
			}
		}
		return nil
	}
}

// relErr is ‖got − want‖∞ / ‖want‖∞.
func relErr(got, want []float64) float64 {
	num, den := 0.0, 0.0
	for e := range want {
		num = math.Max(num, math.Abs(got[e]-want[e]))
		den = math.Max(den, math.Abs(want[e]))
	}
	return num / den
}

// tolerance is the relative error allowed for a plan's payload type.
func tolerance(p *gradcode.Plan) float64 {
	if p.PayloadDType == gradcode.Float32 {
		return math.Max(p.Quality.PredictedRelErr32, 1e-6)
	}
	return 1e-10
}

var speeds = []float64{1, 1, 2, 2, 4, 4}

// runRanks runs steps on the given ranks concurrently and checks every sum.
func runRanks(t *testing.T, comms []*ringtail.Comm, ranks []int, cfg Config, steps int, delay func(rank, step int) time.Duration) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(comms))
	for _, r := range ranks {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			cd, err := New(comms[r], cfg)
			if err != nil {
				errs[r] = err
				return
			}
			defer cd.Close()
			out := make([]float64, cfg.Len)
			for step := 0; step < steps; step++ {
				p := cd.plan
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := cd.Step(ctx, exactCompute(func(s int) time.Duration { return delay(r, s) }), out)
				cancel()
				if err != nil {
					errs[r] = err
					return
				}
				if e := relErr(out, referenceSum(step, p.K, cfg.Len)); e > tolerance(p) {
					errs[r] = fmt.Errorf("step %d: relative error %.3g > %.3g (%s payload)", step, e, tolerance(p), p.PayloadDType)
					return
				}
			}
		}(r)
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func TestCodedSumIsExactForEveryScheme(t *testing.T) {
	for _, scheme := range []gradcode.Scheme{gradcode.Cyclic, gradcode.Hetero, gradcode.Group} {
		t.Run(string(scheme), func(t *testing.T) {
			comms := startComms(t, 6)
			cfg := Config{Scheme: scheme, S: 2, Len: 1000, Seed: 1, Throughputs: Static(speeds)}
			// Ranks take turns being slow so that survivor sets vary.
			runRanks(t, comms, []int{0, 1, 2, 3, 4, 5}, cfg, 6, func(r, s int) time.Duration {
				if (r+s)%3 == 0 {
					return 30 * time.Millisecond
				}
				return time.Duration(r) * time.Millisecond
			})
		})
	}
}

func TestStepsCompleteWithTwoSilentRanks(t *testing.T) {
	comms := startComms(t, 6)
	cfg := Config{Scheme: gradcode.Hetero, S: 2, Len: 1000, Seed: 2, Throughputs: Static(speeds), StepTimeout: 10 * time.Second}
	// Rank 0 (the first leader) leaves; rank 3 stays connected but never
	// takes part.
	// Rank 3 never contributes: a step that waited for it could only end
	// at the step timeout, with an error runRanks reports.
	comms[0].Close()
	runRanks(t, comms, []int{1, 2, 4, 5}, cfg, 6, func(int, int) time.Duration { return 0 })
}

func TestStepWaitsForAtMostNMinusS(t *testing.T) {
	comms := startComms(t, 6)
	cfg := Config{Scheme: gradcode.Cyclic, S: 2, Len: 100, Seed: 3}
	// Ranks 4 and 5 would compute for an hour every step: a step that
	// waited for them could only end at runRanks' 30 s step deadline, with
	// an error. Every rank, 4 and 5 included, must get each exact sum from
	// the other four (the late ranks' compute is cancelled once it is
	// known).
	runRanks(t, comms, []int{0, 1, 2, 3, 4, 5}, cfg, 3, func(r, _ int) time.Duration {
		if r >= 4 {
			return time.Hour
		}
		return 0
	})
}

// TestTooFewRanksFailsInsteadOfHanging: with 2 of 4 ranks gone and s = 1
// no sum can be decoded; Step must fail (ErrTooManyDead once the deaths are
// known, the step timeout otherwise) rather than hang.
func TestTooFewRanksFailsInsteadOfHanging(t *testing.T) {
	comms := startComms(t, 4)
	comms[2].Close()
	comms[3].Close()
	cd, err := New(comms[0], Config{Scheme: gradcode.Cyclic, S: 1, Len: 10, StepTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// The caller's context has no deadline: a timeout can only be the
	// step's own. A minute is the hang detector, not a speed limit.
	done := make(chan error, 1)
	go func() {
		_, err := cd.Step(context.Background(), exactCompute(func(int) time.Duration { return 0 }), make([]float64, 10))
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("Step still running a minute after its 2 s StepTimeout")
	}
	if err == nil || !(errors.Is(err, ErrTooManyDead) || errors.Is(err, context.DeadlineExceeded)) {
		t.Fatalf("Step with 2 of 4 ranks gone and s = 1: %v, want ErrTooManyDead or a timeout", err)
	}
}

// slowSum is a rank's Messenger whose incoming messages are held back until
// the coder has looked at the dead ranks several times: the leader's sum is
// still on its way when the rank learns that others finished and left.
type slowSum struct {
	*ringtail.Comm
	mu      sync.Mutex
	looks   int
	release chan struct{}
}

func (m *slowSum) Dead() []int {
	m.mu.Lock()
	if m.looks++; m.looks == 8 {
		close(m.release)
	}
	m.mu.Unlock()
	return m.Comm.Dead()
}

func (m *slowSum) NextContribution(ctx context.Context, from []int) (*ringtail.Contribution, error) {
	select {
	case <-m.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return m.Comm.NextContribution(ctx, from)
}

func (m *slowSum) TryContribution(from int, tag, mask uint32) (*ringtail.Contribution, bool) {
	select {
	case <-m.release:
		return m.Comm.TryContribution(from, tag, mask)
	default:
		return nil, false
	}
}

// A late rank that hears that ranks which finished the step left, while the
// leader (alive) still has the sum on its way to it, waits for the sum
// instead of counting the leavers dead and failing with ErrTooManyDead
// (seen as kill9-leader in TestEndToEndTwoRanksFaultMidRun under load: the
// leader sends the sum in rank order, and rank 4 heard that rank 5 got its
// sum and closed before its own sum arrived).
func TestALateRankWaitsForTheSumOfALiveLeader(t *testing.T) {
	comms := startComms(t, 4)
	cfg := Config{Scheme: gradcode.Cyclic, S: 1, Len: 100, Seed: 5, StepTimeout: 30 * time.Second}
	runRanks(t, comms, []int{0, 1, 2}, cfg, 1, func(int, int) time.Duration { return 0 })
	comms[1].Close()
	comms[2].Close()
	for deadline := time.Now().Add(time.Minute); len(comms[3].Left()) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("rank 3 knows of %v left, want ranks 1 and 2", comms[3].Left())
		}
	}
	lateStepGetsLeader0Sum(t, &slowSum{Comm: comms[3], release: make(chan struct{})}, cfg)
}

// A rank that reaches the last step after the others finished it and
// closed their communicators sees them all as dead, yet the leader sent it
// the sum before it closed: the step returns that sum instead of
// ErrTooManyDead (seen as kill9-leader in TestEndToEndTwoRanksFaultMidRun,
// whose fast ranks finish first).
func TestALateRankGetsTheSumOfRanksThatFinished(t *testing.T) {
	comms := startComms(t, 4)
	cfg := Config{Scheme: gradcode.Cyclic, S: 1, Len: 100, Seed: 5, StepTimeout: 30 * time.Second}
	runRanks(t, comms, []int{0, 1, 2}, cfg, 1, func(int, int) time.Duration { return 0 })
	for r := 0; r < 3; r++ {
		comms[r].Close()
	}
	// Rank 3 begins its step once it knows the three are gone (a minute
	// is the hang detector).
	for deadline := time.Now().Add(time.Minute); len(comms[3].Dead()) < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("rank 3 knows of %v dead, want ranks 0, 1 and 2", comms[3].Dead())
		}
	}
	lateStepGetsLeader0Sum(t, comms[3], cfg)
}

// lateStepGetsLeader0Sum runs step 0 of a late rank over m and requires the
// exact sum, from leader 0, rather than an error.
func lateStepGetsLeader0Sum(t *testing.T, m Messenger, cfg Config) {
	t.Helper()
	cd, err := New(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cd.Close()
	out := make([]float64, cfg.Len)
	info, err := cd.Step(context.Background(), exactCompute(func(int) time.Duration { return 0 }), out)
	if err != nil {
		t.Fatalf("the late rank's step: %v, want the sum that leader 0 sent", err)
	}
	if e := relErr(out, referenceSum(0, cd.plan.K, cfg.Len)); e > tolerance(cd.plan) || info.Leader != 0 {
		t.Fatalf("the late rank's step: relative error %.3g, leader %d; want the sum from leader 0", e, info.Leader)
	}
}
