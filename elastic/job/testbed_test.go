package job_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
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

	"github.com/ringtail-ml/ringtail/elastic/shard"
	"github.com/ringtail-ml/ringtail/elastic/shard/wal"
	"github.com/ringtail-ml/ringtail/examples/train"
	"github.com/ringtail-ml/ringtail/internal/testbed"
)

// The test of elastic jobs from the launcher, on the test bed (4
// network namespaces as hosts, the launcher in the hub): `ringtail run
// --elastic -np 3 --min-np 2 --max-np 3` of ringtail-train over hosts
// 0–2 from a discovery script. After epoch 3, host 1 is lost: its link is
// cut and every process in it killed. The job re-forms on hosts 0 and 2;
// host 1 is blacklisted although the script still lists it; the script
// then lists host 3, which gets a rank and joins. The job finishes with
// every shard DONE in the shard service's write-ahead log, and held-out
// accuracy within 1 point of an undisturbed run with the same seed.
func TestElasticJobLosesAHostAndGrowsBackOnTheTestBed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ringtail and ringtail-train and runs two elastic jobs on a 4-host test bed")
	}
	b := testbed.ForTest(t, false, testbed.Config{Hosts: 4})
	ringtail, trainer := buildBinaries(t)
	bed := launcherOn{
		host: func(i int) string { return b.Host(i).Name },
		command: func(ctx context.Context, args ...string) *exec.Cmd {
			return b.HubCommand(ctx, ringtail, args...)
		},
		flags: []string{"--ssh", "ip netns exec", "--master-addr", b.HubAddr().String()},
	}

	base := runElastic(t, bed, trainer, nil)
	t.Logf("undisturbed: %d generations seen by the launcher, test accuracy %.2f%%, %d steps, %.1fs",
		base.generations, 100*base.report.TestAccuracy, base.report.Steps, base.wall.Seconds())

	var killedAt time.Time
	got := runElastic(t, bed, trainer, func(j *elasticRun) {
		j.waitErr("epoch 3 done", regexp.MustCompile(`epoch 3 of \d+ done`)) // --json: rank 0's lines go to stderr
		lost := b.Host(1)
		if err := b.Disconnect(j.ctx, 1); err != nil {
			t.Fatal(err)
		}
		killedAt = time.Now()
		killNamespace(t, lost.Name)
		// The crash's notice and the survivors' generation, in either order.
		lines := j.waitErrAll("the survivors' generation and the blacklisting",
			regexp.MustCompile(`generation \d+: 2 ranks: `+regexp.QuoteMeta(b.Host(0).Name)+`\.0 `+regexp.QuoteMeta(b.Host(2).Name)+`\.0$`),
			regexp.MustCompile(`host `+regexp.QuoteMeta(lost.Name)+` is blacklisted`))
		t.Logf("lost %s; %v later: %s", lost.Name, time.Since(killedAt).Round(time.Millisecond), lines[0])
		j.discover(0, 1, 2, 3) // host 1 still listed: blacklisted, it gets no rank
		grown := j.waitErr("a generation with host 3", regexp.MustCompile(`generation \d+: 3 ranks: .*`+regexp.QuoteMeta(b.Host(3).Name)+`\.0`))
		t.Logf("host 3 added; %v after the loss: %s", time.Since(killedAt).Round(time.Millisecond), grown)
	})
	t.Logf("disturbed: %d generations, test accuracy %.2f%%, %d steps, %.1fs; launcher: %s",
		got.generations, 100*got.report.TestAccuracy, got.report.Steps, got.wall.Seconds(), got.shards)
	if got.generations < 3 {
		t.Errorf("%d generations, want at least 3 (start, without host 1, with host 3)", got.generations)
	}
	if strings.Contains(got.stderr, "starting 1 rank(s) on "+b.Host(1).Name+":1") && strings.Count(got.stderr, b.Host(1).Name+":1") > 1 {
		t.Errorf("the blacklisted host got a rank again:\n%s", got.stderr)
	}
	if d := math.Abs(got.report.TestAccuracy - base.report.TestAccuracy); d > 0.01 {
		t.Errorf("test accuracy %.2f%% vs %.2f%% undisturbed: %.2f points apart, want ≤ 1", 100*got.report.TestAccuracy, 100*base.report.TestAccuracy, 100*d)
	}
}

// launcherOn says where `ringtail run --elastic` runs: the name of the
// job's host i, the launcher's command line, and the launcher flags that
// reach the hosts.
type launcherOn struct {
	host    func(i int) string
	command func(ctx context.Context, args ...string) *exec.Cmd
	flags   []string
}

// elasticRun is one `ringtail run --elastic`.
type elasticRun struct {
	t        *testing.T
	ctx      context.Context
	on       launcherOn
	hostFile string
	out, err *lineTap
}

// discover makes the discovery script list the given hosts (one slot each).
func (j *elasticRun) discover(hosts ...int) {
	j.t.Helper()
	var b strings.Builder
	for _, h := range hosts {
		fmt.Fprintf(&b, "%s:1\n", j.on.host(h))
	}
	tmp := j.hostFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		j.t.Fatal(err)
	}
	if err := os.Rename(tmp, j.hostFile); err != nil { // the script never reads half a list
		j.t.Fatal(err)
	}
}

func (j *elasticRun) waitErr(what string, re *regexp.Regexp) string {
	j.t.Helper()
	return j.err.wait(j.t, j.ctx, what, re)
}

// waitErrAll returns the next lines matching each of res, in any order.
func (j *elasticRun) waitErrAll(what string, res ...*regexp.Regexp) []string {
	j.t.Helper()
	got := make([]string, len(res))
	for left := len(res); left > 0; {
		select {
		case line, ok := <-j.err.lines:
			if !ok {
				j.t.Fatalf("the job ended before %s; got %q", what, got)
			}
			for i, re := range res {
				if got[i] == "" && re.MatchString(line) {
					got[i] = line
					left--
					break
				}
			}
		case <-j.ctx.Done():
			j.t.Fatalf("timed out waiting for %s; got %q", what, got)
		}
	}
	return got
}

// result is what a run produced.
type result struct {
	report      train.ElasticReport
	generations int
	shards      string
	stderr      string
	wall        time.Duration
}

const (
	testEpochs   = 20
	testPerShard = 10
	testSeed     = 5
)

// runElastic runs the job; disturb, if set, runs while it trains. It
// checks the job's success and the shard service's log.
func runElastic(t *testing.T, on launcherOn, trainer string, disturb func(*elasticRun)) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	j := &elasticRun{t: t, ctx: ctx, on: on, hostFile: filepath.Join(dir, "hosts"), out: newLineTap(), err: newLineTap()}
	j.discover(0, 1, 2)
	state := filepath.Join(dir, "state")
	args := append([]string{"run", "--elastic", "-np", "3", "--min-np", "2", "--max-np", "3",
		"--host-discovery-script", "cat " + j.hostFile, "--discovery-interval", "100ms"}, on.flags...)
	args = append(args, "--elastic-state-dir", state, "--timeout", "1m", "--",
		trainer, "--epochs", strconv.Itoa(testEpochs), "--batches-per-shard", strconv.Itoa(testPerShard), "--seed", strconv.Itoa(testSeed),
		"--step-compute", "10ms", "--json")
	cmd := on.command(ctx, args...)
	cmd.Stdout, cmd.Stderr = j.out, j.err
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		j.out.pw.Close() // the taps' waiters learn that no line will come
		j.err.pw.Close()
		waited <- err
	}()
	defer func() {
		if t.Failed() {
			t.Logf("ringtail run stdout:\n%s\nstderr:\n%s", j.out.String(), j.err.String())
		}
	}()
	if disturb != nil {
		disturb(j)
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("ringtail run: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the job did not finish")
	}
	r := result{wall: time.Since(start), stderr: j.err.String()}
	r.generations = len(regexp.MustCompile(`(?m)^ringtail run: generation \d+:`).FindAllString(r.stderr, -1))
	if m := regexp.MustCompile(`(?m)^ringtail run: (shards: .*)$`).FindStringSubmatch(r.stderr); m != nil {
		r.shards = m[1]
	}
	found := false
	for _, line := range strings.Split(j.out.String(), "\n") {
		if _, js, ok := strings.Cut(line, "] {"); ok {
			if err := json.Unmarshal([]byte("{"+js), &r.report); err != nil {
				t.Fatalf("report %q: %v", line, err)
			}
			found = true
		}
	}
	if !found || !r.report.Finished || !r.report.ParamsIdentical {
		t.Fatalf("rank 0's report: found %v, %+v; want finished with identical parameters", found, r.report)
	}

	// Every shard of every epoch is DONE in the service's log.
	cfg := shard.Config{Samples: int64(r.report.TrainRows), ShardSize: int64(r.report.Batch * testPerShard), Epochs: testEpochs, Shuffle: true, Seed: testSeed}
	store, err := wal.Open(state, cfg, wal.Options{})
	if err != nil {
		t.Fatalf("the shard service's log: %v", err)
	}
	defer store.Close()
	snap, k := store.Snapshot(), cfg.NumShards()
	if !snap.Finished || snap.Epoch != testEpochs-1 || int64(len(snap.Done)) != k || snap.Counters.DoneTotal != k*testEpochs {
		t.Fatalf("log: finished %v, epoch %d, %d DONE in the last epoch, %d in all; want finished, epoch %d, %d, %d",
			snap.Finished, snap.Epoch, len(snap.Done), snap.Counters.DoneTotal, testEpochs-1, k, k*testEpochs)
	}
	t.Logf("log: %d records; %d shards × %d epochs DONE, %d pulls, %d requeued, %d duplicate DONEs",
		store.Seq(), k, testEpochs, snap.Counters.Pulls, snap.Counters.Requeued, snap.Counters.Duplicates)
	return r
}

// killNamespace kills every process in the network namespace (the lost
// host's ranks, their watcher scripts).
func killNamespace(t *testing.T, ns string) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		t.Fatalf("ip netns pids %s: %v", ns, err)
	}
	n := 0
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		if p, err := os.FindProcess(pid); err == nil && p.Kill() == nil {
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no process to kill in %s", ns)
	}
}

// buildBinaries builds ringtail and ringtail-train for the test.
func buildBinaries(t *testing.T) (ringtail, trainer string) {
	t.Helper()
	dir := t.TempDir()
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		goTool = "go"
	}
	for _, p := range []string{"ringtail", "ringtail-train"} {
		out, err := exec.Command(goTool, "build", "-o", filepath.Join(dir, p), "github.com/ringtail-ml/ringtail/cmd/"+p).CombinedOutput()
		if err != nil {
			t.Fatalf("go build ./cmd/%s: %v\n%s", p, err, out)
		}
	}
	return filepath.Join(dir, "ringtail"), filepath.Join(dir, "ringtail-train")
}

// lineTap records a process's output and hands each line to whoever
// waits for one.
type lineTap struct {
	pw    *io.PipeWriter
	mu    sync.Mutex
	all   strings.Builder
	lines chan string
}

func newLineTap() *lineTap {
	pr, pw := io.Pipe()
	l := &lineTap{pw: pw, lines: make(chan string, 1<<16)}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		defer close(l.lines)
		for sc.Scan() {
			l.mu.Lock()
			l.all.WriteString(sc.Text() + "\n")
			l.mu.Unlock()
			select {
			case l.lines <- sc.Text():
			default: // nobody waits that far ahead
			}
		}
	}()
	return l
}

func (l *lineTap) Write(p []byte) (int, error) { return l.pw.Write(p) }

func (l *lineTap) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all.String()
}

// wait returns the next line matching re.
func (l *lineTap) wait(t *testing.T, ctx context.Context, what string, re *regexp.Regexp) string {
	t.Helper()
	for {
		select {
		case line, ok := <-l.lines:
			if !ok {
				t.Fatalf("the job ended before %s", what)
			}
			if re.MatchString(line) {
				return line
			}
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
