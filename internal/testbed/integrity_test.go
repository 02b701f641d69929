package testbed

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/internal/syncbuf"
)

// bedRank is one rank started directly in its host's namespace.
type bedRank struct {
	cmd            *exec.Cmd
	stdout, stderr syncbuf.Buffer
}

// startRanks starts `ringtail args...` as rank i on host i of b, one rank
// a host, with env added to the environment, each rank's own error kept
// (under ringtail run the first failure would stop the others).
func startRanks(t *testing.T, ctx context.Context, b *Bed, port int, env []string, args ...string) []*bedRank {
	t.Helper()
	n := len(b.Hosts())
	ranks := make([]*bedRank, n)
	for i := range ranks {
		r := &bedRank{cmd: b.Command(ctx, i, ringtail(t), args...)}
		r.cmd.Env = append(append(os.Environ(), "RANK="+strconv.Itoa(i), "WORLD_SIZE="+strconv.Itoa(n),
			"MASTER_ADDR="+b.Host(0).Addr.String(), "MASTER_PORT="+strconv.Itoa(port),
			"RINGTAIL_SECRET=testbed-secret-0123", "RINGTAIL_PEER_TIMEOUT=5s", "RINGTAIL_TIMEOUT=1m", "RINGTAIL_CONNECT_TIMEOUT=1m"), env...)
		r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
		r.cmd.WaitDelay = 5 * time.Second
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ranks[i] = r
	}
	return ranks
}

// integrityLink matches the link an integrity failure names: both ranks,
// the channel and both addresses.
var integrityLink = regexp.MustCompile(`from rank (\d+) to rank (\d+) on channel \d+ \(\d+\.\d+\.\d+\.\d+:\d+ -> \d+\.\d+\.\d+\.\d+:\d+\) failed its integrity check`)

// A device on the path between two hosts that flips one bit of one data
// frame: the allreduce fails on every rank (no rank returns the corrupted
// sum as a result), every rank with an integrity error naming the link
// (the catching rank lingers at its close until its peers have read its
// abort, so its exit never resets a connection with the abort still in
// flight), and `ringtail debug analyze` on the flight recorder's dumps
// names the link. (On the bed a rank sees a proxied connection come from
// its own host's proxy, so the addresses named are the proxy's; between
// real hosts they are the peers'.) The same job without the flip returns
// the expected sums bit for bit.
func TestFlippedByteBetweenHostsFailsEveryRankNamingTheLink(t *testing.T) {
	b := ForTest(t, true, Config{Hosts: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const via = 1 // the host whose proxy flips
	if err := b.SetLink(ctx, via, Link{Proxy: true}); err != nil {
		t.Fatal(err)
	}

	// Without the flip: through the same proxy, every element of every
	// size equals the expected sum exactly (the bench's check has no
	// tolerance for float32 sums of its integers).
	clean := startRanks(t, ctx, b, 29421, nil, "bench", "allreduce", "-b", "1M", "-e", "4M", "-f", "4", "--iters", "3", "--warmup", "1")
	for i, r := range clean {
		if err := r.cmd.Wait(); err != nil {
			t.Fatalf("rank %d without the flip: %v\n%s", i, err, r.stderr.String())
		}
	}
	got := rows(t, regexp.MustCompile(`(?m)^`).ReplaceAllString(clean[0].stdout.String(), "[0] "))
	for _, size := range []int64{1 << 20, 4 << 20} {
		if r, ok := got[size]; !ok || r[3] != 0 {
			t.Fatalf("without the flip, %d bytes: row %v (found %v); stdout:\n%s", size, r, ok, clean[0].stdout.String())
		}
	}

	// With the flip, while the iterations run.
	dumps := t.TempDir()
	ranks := startRanks(t, ctx, b, 29422, []string{"RINGTAIL_FLIGHT_DIR=" + dumps},
		"bench", "allreduce", "-b", "1M", "-e", "1M", "--iters", "100000", "--warmup", "1")
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(ranks[0].stdout.String(), "#wrong") {
		if time.Now().After(deadline) {
			t.Fatalf("the job did not start; rank 0: %s", ranks[0].stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	flipped, err := b.Flip(via, 32<<20) // past the link probe of the first call across hosts: into the allreduces
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-flipped:
	case <-ctx.Done():
		t.Fatal("no byte was flipped")
	}
	// Every rank fails, naming the same link.
	var link []string
	for i, r := range ranks {
		err := r.cmd.Wait()
		msg := strings.TrimSpace(r.stderr.String())
		t.Logf("rank %d: %v: %s", i, err, msg)
		if err == nil {
			t.Errorf("rank %d succeeded with a flipped byte on the path", i)
			continue
		}
		m := integrityLink.FindStringSubmatch(msg)
		if !strings.Contains(msg, "frame integrity") || m == nil {
			t.Errorf("rank %d's error is not an integrity failure naming the link: %s", i, msg)
			continue
		}
		if link == nil {
			link = m
		} else if m[0] != link[0] {
			t.Errorf("rank %d names link %q, another rank %q", i, m[0], link[0])
		}
	}
	if link == nil {
		t.Fatal("no rank's error is an integrity failure naming the link")
	}
	// The frames of a link that crosses host via were changed.
	if from, _ := strconv.Atoi(link[1]); from != via {
		if to, _ := strconv.Atoi(link[2]); to != via {
			t.Errorf("the failing link %s -> %s does not cross host %d", link[1], link[2], via)
		}
	}
	out, err := exec.CommandContext(ctx, ringtail(t), "debug", "analyze", dumps).CombinedOutput()
	t.Logf("ringtail debug analyze:\n%s", out)
	if err != nil && len(out) == 0 {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "frame integrity") || !strings.Contains(string(out), link[0]) {
		t.Errorf("analyze does not name the link %q", link[0])
	}
	if !strings.Contains(string(out), "failed in AllReduce") {
		t.Error("analyze does not say the ranks failed in an AllReduce")
	}
}
