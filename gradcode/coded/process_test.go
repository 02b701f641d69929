package coded

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail"
	"github.com/ringtail-ml/ringtail/gradcode"
)

// The end-to-end tests run 6 real rank processes: this test binary
// re-executed with CODED_TEST_ROLE=rank runs processSteps coded steps and
// prints one JSON line per step.

const processSteps = 40

type stepReport struct {
	Rank   int     `json:"rank"`
	Step   int     `json:"step"`
	RelErr float64 `json:"rel_err"`
	Tol    float64 `json:"tol"`
	Err    string  `json:"err,omitempty"`
}

func TestMain(m *testing.M) {
	if os.Getenv("CODED_TEST_ROLE") == "rank" {
		os.Exit(rankProcess())
	}
	os.Exit(m.Run())
}

func rankProcess() int {
	cfg, err := ringtail.ConfigFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg.TolerateDeaths = true
	out := json.NewEncoder(os.Stdout)
	c, err := ringtail.New(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer c.Close()
	ccfg := Config{Scheme: gradcode.Hetero, S: 2, Len: 512, Seed: 5, Throughputs: Static(speeds), StepTimeout: 20 * time.Second}
	cd, err := New(c, ccfg)
	if err != nil {
		_ = out.Encode(stepReport{Rank: cfg.Rank, Step: -1, Err: err.Error()})
		return 1
	}
	sum := make([]float64, ccfg.Len)
	for step := 0; step < processSteps; step++ {
		p := cd.plan
		_, err := cd.Step(context.Background(), exactCompute(func(int) time.Duration { return 50 * time.Millisecond }), sum)
		if err != nil {
			_ = out.Encode(stepReport{Rank: cfg.Rank, Step: step, Err: err.Error()})
			return 1
		}
		_ = out.Encode(stepReport{Rank: cfg.Rank, Step: step, RelErr: relErr(sum, referenceSum(step, p.K, ccfg.Len)), Tol: tolerance(p)})
	}
	return 0
}

type rankProc struct {
	cmd     *exec.Cmd
	reports chan stepReport
}

func startRankProcs(t *testing.T, n int) []*rankProc {
	t.Helper()
	port := freePort(t)
	procs := make([]*rankProc, n)
	for r := 0; r < n; r++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "CODED_TEST_ROLE=rank",
			"RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(n), "MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port),
			"RINGTAIL_SECRET=coded-test-secret-0123", "RINGTAIL_PEER_TIMEOUT=4s", "RINGTAIL_TIMEOUT=30s", "RINGTAIL_CONNECT_TIMEOUT=30s")
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p := &rankProc{cmd: cmd, reports: make(chan stepReport, processSteps+2)}
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				var rep stepReport
				if json.Unmarshal(sc.Bytes(), &rep) == nil {
					p.reports <- rep
				}
			}
			close(p.reports)
		}()
		procs[r] = p
	}
	t.Cleanup(func() {
		for _, p := range procs {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	})
	return procs
}

// expectAllSteps waits for every rank not in victims to report every step
// with a sum within its tolerance; start[r] is the first step not yet read.
func expectAllSteps(t *testing.T, procs []*rankProc, victims []int, start []int, limit time.Duration) {
	t.Helper()
	timeout := time.After(limit)
	for r, p := range procs {
		if slices.Contains(victims, r) {
			continue
		}
		next := start[r]
		for next < processSteps {
			select {
			case rep, ok := <-p.reports:
				if !ok {
					t.Fatalf("rank %d exited after %d steps", r, next)
				}
				if rep.Err != "" {
					t.Fatalf("rank %d step %d: %s", r, rep.Step, rep.Err)
				}
				if rep.Step != next || !(rep.RelErr <= rep.Tol) {
					t.Fatalf("rank %d: %+v, want step %d within its tolerance", r, rep, next)
				}
				next++
			case <-timeout:
				t.Fatalf("rank %d completed %d of %d steps within %v", r, next, processSteps, limit)
			}
		}
	}
}

// waitStep waits until rank r reports step, checking the steps before it,
// and returns the last step read.
func waitStep(t *testing.T, p *rankProc, r, step int) int {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case rep, ok := <-p.reports:
			if !ok || rep.Err != "" || !(rep.RelErr <= rep.Tol) {
				t.Fatalf("rank %d before the fault: %+v", r, rep)
			}
			if rep.Step >= step {
				return rep.Step
			}
		case <-timeout:
			t.Fatalf("rank %d never reached step %d", r, step)
		}
	}
}

func TestEndToEndTwoRanksFaultMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	for _, tc := range []struct {
		name    string
		sig     syscall.Signal
		victims []int
	}{
		{"kill9-leader", syscall.SIGKILL, []int{0, 3}},
		{"sigstop", syscall.SIGSTOP, []int{2, 5}},
		{"sigstop-leader", syscall.SIGSTOP, []int{0, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			procs := startRankProcs(t, 6)
			// Rank 1 is never a victim; the fault lands mid-run.
			start := make([]int, len(procs))
			start[1] = waitStep(t, procs[1], 1, 5) + 1
			faultAt := time.Now()
			for _, v := range tc.victims {
				if err := procs[v].cmd.Process.Signal(tc.sig); err != nil {
					t.Fatal(err)
				}
			}
			expectAllSteps(t, procs, tc.victims, start, 60*time.Second)
			t.Logf("%d steps done on every live rank %v after the fault", processSteps, time.Since(faultAt).Round(time.Millisecond))
		})
	}
}
