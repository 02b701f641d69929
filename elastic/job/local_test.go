package job_test

import (
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The issue's test with local processes: `ringtail run --elastic -np 3
// --min-np 2 --max-np 3` of ringtail-train on three "hosts" that are
// loopback addresses of this machine (127.0.0.1–3, each a host of its
// own to the launcher, its ranks local processes). After epoch 3 the
// rank of 127.0.0.2 is killed (SIGKILL, a crash): the survivors re-form
// without it, its host is blacklisted although the discovery script
// still lists it, and once the script lists 127.0.0.4 that host gets a
// rank which joins the job. The job finishes with every shard of every
// epoch DONE in the shard service's log (runElastic checks) and the
// ranks' parameters identical.
func TestElasticJobLosesARankAndGrowsBack(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ringtail and ringtail-train and runs an elastic job of local processes")
	}
	ringtail, trainer := buildBinaries(t)
	local := launcherOn{
		host: func(i int) string { return "127.0.0." + strconv.Itoa(i+1) },
		command: func(ctx context.Context, args ...string) *exec.Cmd {
			return exec.CommandContext(ctx, ringtail, args...)
		},
	}
	victim := local.host(1) + ".0"
	got := runElastic(t, local, trainer, func(j *elasticRun) {
		started := j.waitErr("the start of rank "+victim, regexp.MustCompile(`^\[`+regexp.QuoteMeta(victim)+`\] ringtail-train: elastic rank \S+ \(pid (\d+)\)`))
		pid, err := strconv.Atoi(regexp.MustCompile(`\(pid (\d+)\)`).FindStringSubmatch(started)[1])
		if err != nil {
			t.Fatal(err)
		}
		j.waitErr("epoch 3 done", regexp.MustCompile(`epoch 3 of \d+ done`)) // --json: rank 0's lines go to stderr
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("killing rank %s (pid %d): %v", victim, pid, err)
		}
		// The crash's notice and the survivors' generation, in either order.
		lines := j.waitErrAll("the blacklisting and the survivors' generation",
			regexp.MustCompile(`rank `+regexp.QuoteMeta(victim)+` exited with .*host `+regexp.QuoteMeta(local.host(1))+` is blacklisted`),
			regexp.MustCompile(`generation \d+: 2 ranks: `+regexp.QuoteMeta(local.host(0))+`\.0 `+regexp.QuoteMeta(local.host(2))+`\.0$`))
		t.Logf("killed %s: %s", victim, lines[1])
		j.discover(0, 1, 2, 3) // host 1 still listed: blacklisted, it gets no rank
		grown := j.waitErr("a generation with "+local.host(3), regexp.MustCompile(`generation \d+: 3 ranks: .*`+regexp.QuoteMeta(local.host(3))+`\.0`))
		t.Logf("added %s: %s", local.host(3), grown)
	})
	t.Logf("%d generations, test accuracy %.2f%%, %d steps, %.1fs; launcher: %s",
		got.generations, 100*got.report.TestAccuracy, got.report.Steps, got.wall.Seconds(), got.shards)
	if got.generations < 3 {
		t.Errorf("%d generations, want at least 3 (start, without %s, with %s)", got.generations, local.host(1), local.host(3))
	}
	if n := strings.Count(got.stderr, "starting 1 rank(s) on "+local.host(1)+":1"); n != 1 {
		t.Errorf("host %s got ranks %d times, want once (it is blacklisted after the crash):\n%s", local.host(1), n, got.stderr)
	}
}
