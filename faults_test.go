package ringtail

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The fault tests run real rank processes: this test binary re-executed
// with RINGTAIL_TEST_ROLE=rank joins the job from its environment and
// allreduces in a loop, printing one JSON line when it starts and one when
// it fails.

type rankReport struct {
	Rank    int    `json:"rank"`
	Event   string `json:"event"` // "ready" or "failed"
	Err     string `json:"err,omitempty"`
	Blamed  int    `json:"blamed"`
	Kind    string `json:"kind,omitempty"`
	AtNanos int64  `json:"at_nanos"`
}

func TestMain(m *testing.M) {
	switch os.Getenv("RINGTAIL_TEST_ROLE") {
	case "rank":
		os.Exit(rankProcess())
	case "verify":
		os.Exit(verifyProcess())
	}
	os.Exit(m.Run())
}

func rankProcess() int {
	cfg, err := ConfigFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	out := json.NewEncoder(os.Stdout)
	ctx := context.Background()
	c, err := New(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer c.Close()
	buf := make([]float32, 1<<18) // 1 MiB
	for i := 0; ; i++ {
		if err := c.AllReduce(ctx, Float32s(buf), Sum); err != nil {
			rep := rankReport{Rank: cfg.Rank, Event: "failed", Err: err.Error(), Blamed: -1, AtNanos: time.Now().UnixNano()}
			var e *Error
			if errors.As(err, &e) {
				rep.Blamed, rep.Kind = e.Rank, e.Kind.String()
			}
			_ = out.Encode(rep)
			return 1
		}
		if i == 3 {
			_ = out.Encode(rankReport{Rank: cfg.Rank, Event: "ready", Blamed: -1, AtNanos: time.Now().UnixNano()})
		}
	}
}

type rankProc struct {
	cmd     *exec.Cmd
	reports chan rankReport
}

func startRankProcs(t *testing.T, n int, extraEnv ...string) []*rankProc {
	t.Helper()
	port := freePort(t)
	procs := make([]*rankProc, n)
	for r := 0; r < n; r++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "RINGTAIL_TEST_ROLE=rank",
			"RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(n), "MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port),
			"RINGTAIL_SECRET=fault-test-secret-0123", "RINGTAIL_PEER_TIMEOUT=2s", "RINGTAIL_TIMEOUT=60s", "RINGTAIL_CONNECT_TIMEOUT=30s")
		cmd.Env = append(cmd.Env, extraEnv...)
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p := &rankProc{cmd: cmd, reports: make(chan rankReport, 4)}
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				var rep rankReport
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
	for r, p := range procs {
		select {
		case rep := <-p.reports:
			if rep.Event != "ready" {
				t.Fatalf("rank %d: %+v", r, rep)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("rank %d never became ready", r)
		}
	}
	return procs
}

// expectBlame waits for every rank except victim to fail with an error of
// kind blaming victim. The kind says which detector fired (a closed
// connection, the peer timeout, the 60 s operation timeout), which is what
// the tests mean by fast; how long it took is logged, not asserted.
func expectBlame(t *testing.T, procs []*rankProc, victim int, faultAt time.Time, kind Kind) {
	t.Helper()
	for r, p := range procs {
		if r == victim {
			continue
		}
		select {
		case rep, ok := <-p.reports:
			if !ok {
				t.Fatalf("rank %d exited without reporting", r)
			}
			took := time.Unix(0, rep.AtNanos).Sub(faultAt)
			t.Logf("rank %d after %v: %s", r, took.Round(time.Millisecond), rep.Err)
			if rep.Event != "failed" || rep.Blamed != victim || rep.Kind != kind.String() {
				t.Fatalf("rank %d: %+v, want a %q failure blaming rank %d", r, rep, kind, victim)
			}
			if !strings.Contains(rep.Err, fmt.Sprintf("rank %d", victim)) {
				t.Fatalf("rank %d's error does not name rank %d: %s", r, victim, rep.Err)
			}
		case <-time.After(2 * time.Minute): // past the 60 s operation timeout: a hang
			t.Fatalf("rank %d still blocked 2 minutes after the fault", r)
		}
	}
}

func TestKill9OfOneRankFailsTheOthersFast(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	for _, transport := range []string{"shm", "unix", "tcp"} {
		t.Run(transport, func(t *testing.T) {
			env := map[string][]string{"shm": nil, "unix": {"RINGTAIL_NO_SHM=1"}, "tcp": {"RINGTAIL_NO_UNIX=1"}}[transport]
			procs := startRankProcs(t, 4, env...)
			at := time.Now()
			if err := procs[2].cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			// The closed connection, not the 2 s peer timeout.
			expectBlame(t, procs, 2, at, KindPeerDied)
		})
	}
}

func TestSIGSTOPOfOneRankIsDetectedWithinThePeerTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	procs := startRankProcs(t, 4)
	at := time.Now()
	if err := procs[1].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The 2 s peer timeout, not the 60 s operation timeout.
	expectBlame(t, procs, 1, at, KindSilent)
}

// verifyProcess allreduces, broadcasts and allgathers known values of every
// size class as a separate process and exits non-zero on a wrong element.
func verifyProcess() int {
	cfg, err := ConfigFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	c, err := New(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer c.Close()
	n := c.Size()
	for _, count := range []int{0, 1, 7, 1021, 1 << 20, 4<<20 + 3} {
		buf := make([]float32, count)
		for i := range buf {
			buf[i] = float32(cfg.Rank + i%3)
		}
		if err := c.AllReduce(ctx, Float32s(buf), Sum); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 4
		}
		for i, v := range buf {
			if want := float32(n*(n-1)/2 + n*(i%3)); v != want {
				fmt.Fprintf(os.Stderr, "count %d elem %d = %v want %v\n", count, i, v, want)
				return 5
			}
		}
		mine := make([]int64, count%1000)
		for i := range mine {
			mine[i] = int64(cfg.Rank*1000 + i)
		}
		all := make([]int64, n*len(mine))
		if err := c.AllGather(ctx, Int64s(mine), Int64s(all)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 6
		}
		for i, v := range all {
			if want := int64((i/len(mine))*1000 + i%len(mine)); v != want {
				fmt.Fprintf(os.Stderr, "allgather elem %d = %d want %d\n", i, v, want)
				return 7
			}
		}
	}
	return 0
}

func TestCollectivesAcrossSeparateProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	for _, n := range []int{2, 5} {
		port := freePort(t)
		cmds := make([]*exec.Cmd, n)
		for r := range cmds {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "RINGTAIL_TEST_ROLE=verify", "RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(n),
				"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port), "RINGTAIL_SECRET=verify-secret-0123456", "RINGTAIL_TIMEOUT=60s")
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds[r] = cmd
		}
		for r, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				t.Fatalf("world %d rank %d: %v", n, r, err)
			}
		}
	}
}
