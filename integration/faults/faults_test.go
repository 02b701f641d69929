//go:build faults

package faults

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/internal/citest"
	"github.com/ringtail-ml/ringtail/internal/flight"
)

// The harness: go test -tags faults ./integration/faults [-args flags].
// make faults runs it with the small CI counts below; the campaign of
// docs/reliability.md runs it by hand with -runs 320.
var (
	runs        = flag.Int("runs", 16, "fault runs (cycling through every fault, both transports and the rank counts)")
	seed        = flag.Uint64("seed", 1, "seed choosing each run's target rank and step")
	nps         = flag.String("np", "2,3,4,6,8", "rank counts to cycle through")
	only        = flag.String("fault", "", "comma-separated faults to run (default: all)")
	elems       = flag.Int("elems", 1<<16, "float32 elements per collective (more than 262144: past the 1 MiB allreduce piece, where shared memory chooses pieces or the plain ring by measurement)")
	peerTimeout = flag.Duration("peer-timeout", 2*time.Second, "RINGTAIL_PEER_TIMEOUT of the jobs")
	slack       = flag.Duration("slack", time.Second, "how much later than the peer timeout after a fault a rank may fail")
	floodConns  = flag.Int("flood", 2000, "connections per flood (0: no floods)")
	floodBudget = flag.Int64("flood-budget-mib", 20, "allowed RSS growth of a flood's target, MiB")
	verbose     = flag.Bool("verbose-runs", false, "log every run's problems and stderr")
	strict      = flag.Bool("strict", citest.InCI(), "fail the test when any run misses an expectation (default under CI=true; otherwise the table is the result)")
)

func binaries(t *testing.T) Binaries {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bins, err := Build(root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bins
}

func parseNPs(t *testing.T) []int {
	var out []int
	for _, s := range strings.Split(*nps, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 2 || n > 64 {
			t.Fatalf("-np %q: want rank counts of 2 and more", *nps)
		}
		out = append(out, n)
	}
	return out
}

func parseFaults(t *testing.T) []Fault {
	if *only == "" {
		return nil
	}
	var out []Fault
	for _, s := range strings.Split(*only, ",") {
		f := Fault(strings.TrimSpace(s))
		if f != FaultNone && !containsFault(Faults, f) {
			t.Fatalf("-fault %q: want one of %v or none", s, Faults)
		}
		out = append(out, f)
	}
	return out
}

func containsFault(fs []Fault, f Fault) bool {
	for _, x := range fs {
		if x == f {
			return true
		}
	}
	return false
}

// TestFaults runs the matrix of fault runs and prints the summary table.
func TestFaults(t *testing.T) {
	if *runs <= 0 {
		t.Skip("-runs 0")
	}
	bins := binaries(t)
	scs := Matrix(MatrixConfig{Runs: *runs, Seed: *seed, NPs: parseNPs(t), Faults: parseFaults(t), PeerTimeout: *peerTimeout, Elems: *elems})
	var results []Result
	var verdicts []Verdict
	start := time.Now()
	for i, sc := range scs {
		r := RunScenario(context.Background(), bins, sc)
		v := Check(r, *slack)
		results, verdicts = append(results, r), append(verdicts, v)
		status := "ok"
		if !v.OK() {
			status = fmt.Sprintf("%d problem(s)", len(v.Problems))
		}
		t.Logf("run %d/%d %s: %s (%v)", i+1, len(scs), sc, status, r.End.Sub(r.Start).Round(time.Millisecond))
		for _, p := range v.Problems {
			t.Logf("    %s: %s", p.Class, p.Detail)
		}
		if len(r.Dumps) > 0 {
			rep := flight.Analyze(r.Dumps)
			t.Logf("    analyze (%d dumps): %s", len(r.Dumps), strings.Join(rep.Lines, " | "))
		}
		if v.OK() {
			os.RemoveAll(r.DumpDir)
		} else if r.DumpDir != "" {
			t.Logf("    dumps kept in %s", r.DumpDir)
		}
		if *verbose && !v.OK() {
			t.Logf("    stderr:\n%s", r.Stderr)
		}
	}
	var b strings.Builder
	WriteTable(&b, Summarize(results, verdicts))
	fmt.Fprintf(os.Stdout, "\nfault runs: %d in %v (seed %d, peer timeout %v, slack %v)\n%s", len(scs), time.Since(start).Round(time.Second), *seed, *peerTimeout, *slack, b.String())
	if *strict {
		for i, v := range verdicts {
			if !v.OK() {
				t.Errorf("%s: %v", results[i].Scenario, v.Problems)
			}
		}
	}
}

// TestFloods floods the rendezvous (both control planes), a rank's data
// plane and the shard service, each while a real job runs.
func TestFloods(t *testing.T) {
	if *floodConns <= 0 {
		t.Skip("-flood 0")
	}
	bins := binaries(t)
	dir := t.TempDir()
	budget := *floodBudget << 20
	floods := []FloodResult{
		FloodRendezvous(bins, dir, "libp2p", 4, *floodConns),
		FloodRendezvous(bins, dir, "tcp", 4, *floodConns),
		FloodRank(bins, 3, *floodConns),
		FloodShardService(context.Background(), bins, filepath.Join(dir, "shards"), 4, *floodConns),
	}
	var b strings.Builder
	WriteFloodTable(&b, floods, budget)
	fmt.Fprintf(os.Stdout, "\nfloods (budget %d MiB of RSS growth):\n%s", *floodBudget, b.String())
	if *strict {
		for _, f := range floods {
			if f.Err != nil || !f.JobOK || f.Growth() > budget || f.Refusals == 0 {
				t.Errorf("%s: %+v", f.Target, f)
			}
		}
	}
}
