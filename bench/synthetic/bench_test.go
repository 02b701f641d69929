package synthetic

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/internal/commtest"
	"github.com/ringtail-ml/ringtail/internal/launch"
	"github.com/ringtail-ml/ringtail/straggler"
	"github.com/ringtail-ml/ringtail/straggler/driver"
	"github.com/ringtail-ml/ringtail/straggler/inject"
	"github.com/ringtail-ml/ringtail/straggler/workload"
)

// shaperLog records the link requests of every rank's LinkShaper.
type shaperLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *shaperLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, s)
}

// rankShaper is one rank's LinkShaper: it records, and shapes nothing.
type rankShaper struct {
	rank int
	log  *shaperLog
}

func (s rankShaper) SetLinks(_ context.Context, spec string) error {
	s.log.add(fmt.Sprintf("rank %d sets %q", s.rank, spec))
	return nil
}

func (s rankShaper) Stall(_ context.Context, rank int, d time.Duration) error {
	s.log.add(fmt.Sprintf("rank %d stalls rank %d for %v", s.rank, rank, d))
	return nil
}

// coordinator serves a job's rendezvous on a loopback port, as ringtail
// run does for its ranks, until the test ends; it returns the port.
func coordinator(t *testing.T, jobID string, secret []byte, world int) int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan int, 1)
	done := make(chan error, 1)
	go func() {
		done <- launch.ServeCoordinator(ctx, launch.CoordinatorConfig{Listen: "127.0.0.1:0", ControlPlane: "tcp", World: world, Secret: secret, JobID: jobID,
			Ready: func(a net.Addr, _ string) { ready <- a.(*net.TCPAddr).Port }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("coordinator: %v", err)
		}
	})
	select {
	case port := <-ready:
		return port
	case err := <-done:
		t.Fatalf("coordinator: %v", err)
		return 0
	}
}

// Each rank is a bench of its own, as in processes started by a launcher:
// they meet in a new generation per run, agree on every row, and only
// rank 0 sets the links, before each run; the stalling rank stalls its
// own link.
func TestBenchWithRanksAsProcesses(t *testing.T) {
	const n = 4
	const job, secret = "bench-processes-test", "bench-processes-test-secret"
	port := coordinator(t, job, []byte(secret), n)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	log := &shaperLog{}
	rows := make([][]BenchRow, n)
	errs := commtest.Each(n, func(r int) error {
		gen := uint64(0)
		cfg := BenchConfig{Ranks: []int{n}, Patterns: []string{"none", "slow-3x", "stall-1s"}, Policies: []string{"adaptive", "star"},
			Warmup: 2, Steps: 4, GlobalBatch: 32, PerSample: time.Millisecond, GradBytes: 4096, Seed: 1, Probe: true,
			Rank: r, Links: rankShaper{r, log}, LinkRate: 1e9,
			Join: func(ctx context.Context) (*ringtail.Comm, error) {
				c := ringtail.DefaultConfig(r, n)
				c.MasterPort, c.Generation, c.ExternalCoordinator = port, gen, true
				c.JobID, c.Secret, c.ControlPlane = job, []byte(secret), "tcp"
				c.ConnectTimeout, c.OpTimeout = time.Minute, time.Minute
				gen++
				return ringtail.New(ctx, c)
			}}
		return RunBench(ctx, cfg, func(row BenchRow) error {
			rows[r] = append(rows[r], row)
			return nil
		})
	})
	commtest.NoErrors(t, errs)
	if len(rows[0]) != 6 {
		t.Fatalf("rank 0 has %d rows, want 3 patterns × 2 policies", len(rows[0]))
	}
	for r := 1; r < n; r++ {
		if !reflect.DeepEqual(rows[r], rows[0]) {
			t.Errorf("rank %d's rows differ from rank 0's:\n%+v\n%+v", r, rows[r], rows[0])
		}
	}
	base := workload.BaseLinks(n, 1e9)
	stall := ""
	for _, p := range workload.NetworkPatterns(n, 1e9, 2+4/2) {
		if p.Name == "stall-1s" {
			stall = p.Spec
		}
	}
	for _, row := range rows[0] {
		if row.Computed <= 0 || row.Computed != row.Applied {
			t.Errorf("%s %s: %d samples computed, %d applied", row.Pattern, row.Policy, row.Computed, row.Applied)
		}
		if row.BSP <= 0 || row.Adaptive <= 0 || row.Ideal <= 0 || row.BSPVsNone <= 0 || row.VsNone <= 0 {
			t.Errorf("%s %s: a time or ratio is missing: %+v", row.Pattern, row.Policy, row)
		}
		if want := map[bool]string{true: stall, false: base}[row.Pattern == "stall-1s"]; row.Links != want {
			t.Errorf("%s: links %q, want %q", row.Pattern, row.Links, want)
		}
	}
	// Runs: the clean BSP, none × 2 policies, then BSP and 2 policies for
	// each of the other two patterns.
	want := slices.Repeat([]string{fmt.Sprintf("rank 0 sets %q", base)}, 6)
	want = append(want, slices.Repeat([]string{fmt.Sprintf("rank 0 sets %q", stall)}, 3)...)
	var sets, stalls []string
	for _, c := range log.calls {
		if strings.Contains(c, " sets ") {
			sets = append(sets, c)
		} else {
			stalls = append(stalls, c)
		}
	}
	if !slices.Equal(sets, want) {
		t.Errorf("link settings:\n%s\nwant\n%s", strings.Join(sets, "\n"), strings.Join(want, "\n"))
	}
	if len(stalls) == 0 || len(stalls) > 3 {
		t.Errorf("%d stalls in the 3 runs of stall-1s: %q", len(stalls), stalls)
	}
	for _, s := range stalls {
		if s != "rank 2 stalls rank 2 for 1s" {
			t.Errorf("stall %q, want rank 2 stalling its own link for 1s", s)
		}
	}
}

func TestBenchRefusesNetworkPatternsWithoutLinks(t *testing.T) {
	for _, pat := range []string{"slow-link-10x", "delay-10ms", "lossy-1%", "stall-1s"} {
		cfg := BenchConfig{Ranks: []int{4}, Patterns: []string{"none", pat}, Warmup: 1, Steps: 1, GlobalBatch: 8,
			PerSample: time.Millisecond, GradBytes: 64, LinkRate: 1e9}
		err := RunBench(context.Background(), cfg, func(BenchRow) error {
			t.Errorf("%s: a row was emitted before the refusal", pat)
			return nil
		})
		if !errors.Is(err, ErrNoLinks) || !strings.Contains(err.Error(), pat) {
			t.Errorf("%s without a link shaper: %v, want ErrNoLinks naming it", pat, err)
		}
	}
	cfg := BenchConfig{Ranks: []int{4, 8}, Join: func(context.Context) (*ringtail.Comm, error) { return nil, errors.New("unused") }}
	if err := RunBench(context.Background(), cfg, func(BenchRow) error { return nil }); !errors.Is(err, driver.ErrInvalidConfig) {
		t.Errorf("two worlds for ranks in processes: %v, want driver.ErrInvalidConfig", err)
	}
}

// A run under in-step reassignment applies every sample of every step
// exactly once (Run checks the samples computed against those applied)
// whatever a power law does to the ranks, with every rank in the ring.
func TestRunWithReassignmentAppliesEveryBatchWhole(t *testing.T) {
	const n, warm, steps, batch = 4, 2, 6, 64
	spec, err := inject.Parse("seed=3;powerlaw=4")
	if err != nil {
		t.Fatal(err)
	}
	in, err := inject.New(spec, n)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), Config{Ranks: n, Policy: straggler.NameShares, Injector: in, Warmup: warm, Steps: steps,
		GlobalBatch: batch, PerSample: 200 * time.Microsecond, GradBytes: 4 << 10, Reassign: straggler.DefaultReassignConfig(2)})
	if err != nil {
		t.Fatal(err)
	}
	if r.Applied != steps*batch || r.Total != r.TotalApplied || r.EvictSteps != 0 {
		t.Fatalf("applied %d samples in %d steps of %d (computed %d, applied over the run %d), %d steps evicting", r.Applied, steps, batch, r.Total, r.TotalApplied, r.EvictSteps)
	}
}
