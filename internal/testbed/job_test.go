package testbed

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/internal/syncbuf"
)

// ringtailBin builds cmd/ringtail once per test binary (when a bed can be
// built here) and returns its path.
var ringtailBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "testbed-ringtail")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "ringtail")
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		goTool = "go"
	}
	out, err := exec.Command(goTool, "build", "-o", bin, "github.com/ringtail-ml/ringtail/cmd/ringtail").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/ringtail: %w\n%s", err, out)
	}
	return bin, nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if bin, err := ringtailBin(); err == nil && strings.Contains(bin, "testbed-ringtail") {
		os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}

// ringtail returns the built binary, failing t if it cannot be built.
func ringtail(t testing.TB) string {
	t.Helper()
	bin, err := ringtailBin()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// launch runs `ringtail run <bed flags> runArgs... -- command...` in the
// hub, as a user would on a login node, and returns its status and
// output.
func launch(t testing.TB, ctx context.Context, b *Bed, runArgs []string, command ...string) (int, string, string) {
	t.Helper()
	args := append(append(append([]string{"run"}, b.RunArgs(1)...), runArgs...), "--")
	cmd := b.HubCommand(ctx, ringtail(t), append(args, command...)...)
	var stdout, stderr syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	code := cmd.ProcessState.ExitCode()
	t.Logf("ringtail %q = %d (%v)\nstdout:\n%sstderr:\n%s", cmd.Args[4:], code, err, stdout.String(), stderr.String())
	return code, stdout.String(), stderr.String()
}

func TestRingtailRunStartsRanksInTheHostsNamespaces(t *testing.T) {
	b := ForTest(t, false, Config{Hosts: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code, stdout, _ := launch(t, ctx, b, nil, "sh", "-c", `echo "rank $RANK: $(ip -o -4 addr show dev eth0 | sed -n 's/.* inet \([0-9.]*\).*/\1/p') master $MASTER_ADDR"`)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for i, h := range b.Hosts() {
		want := fmt.Sprintf("[%d] rank %d: %s master %s\n", i, i, h.Addr, b.HubAddr())
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
}

// benchRow matches a row of the nccl-tests table (prefixed by the rank).
var benchRow = regexp.MustCompile(`^\[0\]\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s+\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)$`)

// rows parses rank 0's table: size -> {time_us, algbw, busbw, wrong}.
func rows(t testing.TB, stdout string) map[int64][4]float64 {
	t.Helper()
	got := map[int64][4]float64{}
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		m := benchRow.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		size, _ := strconv.ParseInt(m[1], 10, 64)
		var v [4]float64
		for i := range v {
			v[i], _ = strconv.ParseFloat(m[3+i], 64)
		}
		got[size] = v
	}
	return got
}

func TestAllreduceAcrossFourHostsThroughRingtailRun(t *testing.T) {
	b := ForTest(t, false, Config{Hosts: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	code, stdout, _ := launch(t, ctx, b, []string{"--timeout", "1m"},
		ringtail(t), "bench", "allreduce", "-b", "4K", "-e", "4M", "-f", "32", "--iters", "3", "--warmup", "1")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	got := rows(t, stdout)
	for _, size := range []int64{4 << 10, 128 << 10, 4 << 20} {
		r, ok := got[size]
		if !ok {
			t.Errorf("no row for %d bytes", size)
			continue
		}
		if r[3] != 0 {
			t.Errorf("%d bytes: %v wrong elements", size, r[3])
		}
	}
	if !strings.Contains(stdout, "4 ranks (from the launcher)") {
		t.Error("the bench did not take its ranks from the launcher")
	}
}

func TestLinkTakenDownMidJobFailsEveryRankNamingIt(t *testing.T) {
	b := ForTest(t, false, Config{Hosts: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Every rank is started directly in its namespace (as any launcher
	// that sets the environment would), so each one's own error is seen:
	// under ringtail run the first failure stops the others.
	const down = 2
	type rank struct {
		cmd    *exec.Cmd
		stderr syncbuf.Buffer
		stdout syncbuf.Buffer
	}
	ranks := make([]*rank, 4)
	for i := range ranks {
		r := &rank{cmd: b.Command(ctx, i, ringtail(t), "bench", "allreduce", "-b", "1M", "-e", "1M", "--iters", "100000", "--warmup", "1")}
		r.cmd.Env = append(os.Environ(), "RANK="+strconv.Itoa(i), "WORLD_SIZE=4", "MASTER_ADDR="+b.Host(0).Addr.String(), "MASTER_PORT=29411",
			"RINGTAIL_SECRET=testbed-secret-0123", "RINGTAIL_PEER_TIMEOUT=2s", "RINGTAIL_TIMEOUT=1m", "RINGTAIL_CONNECT_TIMEOUT=1m")
		r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
		r.cmd.WaitDelay = 5 * time.Second
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ranks[i] = r
	}
	// The job runs once rank 0 has printed its table header (the
	// communicator is up); the link goes down while the iterations run.
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(ranks[0].stdout.String(), "#wrong") {
		if time.Now().After(deadline) {
			t.Fatalf("the job did not start; rank 0: %s", ranks[0].stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	if err := b.Disconnect(ctx, down); err != nil {
		t.Fatal(err)
	}
	for i, r := range ranks {
		err := r.cmd.Wait()
		msg := strings.TrimSpace(r.stderr.String())
		t.Logf("rank %d after %v: %v: %s", i, time.Since(start).Round(time.Millisecond), err, msg)
		if err == nil {
			t.Errorf("rank %d succeeded with host %d's link down", i, down)
			continue
		}
		if i != down && !regexp.MustCompile(`\brank `+strconv.Itoa(down)+`\b`).MatchString(msg) {
			t.Errorf("rank %d's error does not name rank %d: %s", i, down, msg)
		}
	}
}

// BenchmarkAllreduceWithOneSlowLink measures a 4-host allreduce through
// ringtail run with host 3's link at 200 Mbit/s (tbf both ways): a ring
// moves at its slowest link, so busbw should sit near 0.025 GB/s. Run it
// as root: go test -run '^$' -bench SlowLink ./internal/testbed/
func BenchmarkAllreduceWithOneSlowLink(b *testing.B) {
	bed := ForTest(b, false, Config{Hosts: 4})
	ctx := context.Background()
	if err := bed.SetLink(ctx, 3, Link{Rate: 200e6}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		code, stdout, _ := launch(b, ctx, bed, nil, ringtail(b), "bench", "allreduce", "-b", "16M", "-e", "16M", "--iters", "5", "--warmup", "1")
		r, ok := rows(b, stdout)[16<<20]
		if code != 0 || !ok {
			b.Fatalf("exit %d, no 16 MiB row", code)
		}
		b.ReportMetric(r[2], "busbw_GB/s")
	}
}
