package testbed

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/bench/synthetic"
	"github.com/ringtail-ml/ringtail/internal/testbed/control"
)

// serveControl serves b's control socket (links replaced spec by spec,
// rank r on host r) until the test ends, and returns its path.
func serveControl(t *testing.T, b *Bed) string {
	t.Helper()
	shaper := NewShaper(b, len(b.Hosts()), func(r int) int { return r })
	path := filepath.Join(t.TempDir(), "control.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- control.Serve(ctx, ln, shaper) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("control socket: %v", err)
		}
		shaper.Stop()
	})
	return path
}

// `ringtail bench straggler` with its ranks on 4 bed hosts through
// ringtail run, a network pattern applied through the bed's control
// socket (rank 2's link stalled mid-run, its proxy set up between runs):
// every row is there, complete, and every sample's gradient was applied
// exactly once (the bench's own accounting; it fails the run otherwise).
func TestBenchStragglerAcrossFourHostsWithANetworkStraggler(t *testing.T) {
	b := ForTest(t, true, Config{Hosts: 4})
	t.Setenv(control.EnvSocket, serveControl(t, b))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	code, stdout, _ := launch(t, ctx, b, []string{"-x", control.EnvSocket, "--timeout", "3m"}, ringtail(t), "bench", "straggler",
		"--patterns", "stall-1s", "--policy", "star,exact", "--warmup", "2", "--steps", "4", "--batch", "64", "--grad", "256K", "--json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var rows []synthetic.BenchRow
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "[0] ")
		if !ok || !strings.HasPrefix(line, "{") {
			continue
		}
		var row synthetic.BenchRow
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("rank 0's row %q: %v", line, err)
		}
		rows = append(rows, row)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows, want stall-1s × {star, exact}", len(rows))
	}
	for i, want := range []string{"star", "exact"} {
		r := rows[i]
		if r.Pattern != "stall-1s" || r.Policy != want || r.Ranks != 4 {
			t.Errorf("row %d: %s %s %d ranks, want stall-1s %s 4 ranks", i, r.Pattern, r.Policy, r.Ranks, want)
		}
		if !strings.Contains(r.Links, "link=2:rate=1gbit:stall=1s@step4") {
			t.Errorf("row %d: links %q do not stall rank 2 at step 4", i, r.Links)
		}
		if r.BSP <= 0 || r.Adaptive <= 0 || r.Ideal <= 0 || r.Collective <= 0 || r.BSPVsNone <= 0 || r.AppliedPerStep <= 0 {
			t.Errorf("row %d: a time is missing: %+v", i, r)
		}
		// 6 steps of 64 samples at least (a child's own-pace samples come on top).
		if r.Computed < 6*64 || r.Applied != r.Computed {
			t.Errorf("row %d: %d samples computed, %d applied", i, r.Computed, r.Applied)
		}
	}
}
