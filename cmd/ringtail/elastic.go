package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/ringtail-ml/ringtail/bench/recovery"
	"github.com/ringtail-ml/ringtail/internal/cli"
)

// init turns this binary into an elastic bench rank when
// RINGTAIL_ELASTIC_ROLE says so: runBenchRecovery re-executes it for every
// rank, and the rank must not parse the command line as a subcommand.
func init() {
	if code, ok := recovery.RankMain(); ok {
		os.Exit(code)
	}
}

// benchRecoveryRow is the JSON line runBenchRecovery prints.
type benchRecoveryRow struct {
	Case        string    `json:"case"`
	Scheme      string    `json:"scheme"`
	RecoveryS   float64   `json:"recovery_s"` // median over runs
	RecoveryMax float64   `json:"recovery_max_s"`
	DetectS     float64   `json:"detect_s"` // median
	NP          int       `json:"np"`
	Victim      int       `json:"victim"`
	Runs        int       `json:"runs"`
	All         []float64 `json:"recovery_all_s"`
}

const benchRecoveryUsage = `Usage: ringtail bench recovery [-np 4] [--victim 0] [--runs 5] [--json]

Starts -np elastic ranks (this binary), kills rank --victim with SIGKILL
once they train, and reports the time until every survivor has completed
a step on the re-formed ring: the median over --runs measurements. See
docs/elastic.md.
`

// runBenchRecovery implements `ringtail bench recovery`: it starts --np
// elastic ranks (this binary re-executed), kills rank --victim with
// SIGKILL once they train, and reports the time until every survivor has
// completed a step on the re-formed ring (bench/recovery.Run), --runs
// times.
func runBenchRecovery(args []string, stdout, stderr io.Writer) int {
	cmd := cli.New("ringtail bench recovery", benchRecoveryUsage)
	fs := cmd.Flags
	jsonOut := fs.Bool("json", false, "print one JSON object")
	np := fs.Int("np", 4, "ranks before the kill (≥ 2)")
	victim := fs.Int("victim", 0, "rank killed with SIGKILL (0: the proposer, the slowest case)")
	elems := fs.Int("elems", 1<<18, "float32s all-reduced per step")
	pace := fs.Duration("pace", 10*time.Millisecond, "simulated compute per step")
	runs := fs.Int("runs", 5, "measurements (the median is reported)")
	timeout := fs.Duration("timeout", 60*time.Second, "bound on each measurement")
	verbose := fs.Bool("verbose", false, "pass the ranks' stderr through")
	if code, ok := cmd.Parse(args, stdout, stderr); !ok {
		return code
	}
	if *np < 2 || *victim < 0 || *victim >= *np || *runs < 1 || *elems < 1 || *pace < 0 {
		return cmd.Fail(stderr, "need -np ≥ 2, 0 ≤ --victim < -np, --runs ≥ 1, --elems ≥ 1, --pace ≥ 0")
	}
	var rankErr io.Writer
	if *verbose {
		rankErr = stderr
	}
	row := benchRecoveryRow{Case: "recovery", Scheme: "elastic", NP: *np, Victim: *victim, Runs: *runs}
	var detect []float64
	for i := range *runs {
		r, err := recovery.Run(context.Background(), recovery.Config{
			Ranks: *np, Victim: *victim, Elems: *elems, Pace: *pace, Timeout: *timeout, Stderr: rankErr,
		})
		if err != nil {
			fmt.Fprintf(stderr, "ringtail bench recovery: run %d: %v\n", i+1, err)
			return 1
		}
		row.All = append(row.All, r.Recovery.Seconds())
		detect = append(detect, r.Detect.Seconds())
		if !*jsonOut {
			fmt.Fprintf(stdout, "run %d: kill -9 rank %d of %d → every survivor stepping in generation %d after %.1f ms (first failed collective %.1f ms, first step %.1f ms)\n",
				i+1, *victim, *np, r.GenAfter, ms(r.Recovery), ms(r.Detect), ms(r.FirstStep))
		}
	}
	sorted := slices.Sorted(slices.Values(row.All))
	row.RecoveryS, row.RecoveryMax = sorted[len(sorted)/2], sorted[len(sorted)-1]
	slices.Sort(detect)
	row.DetectS = detect[len(detect)/2]
	if *jsonOut {
		if err := printJSONLine(stdout, row); err != nil {
			fmt.Fprintf(stderr, "ringtail bench recovery: %v\n", err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(stdout, "recovery (median of %d): %.1f ms, max %.1f ms\n", *runs, row.RecoveryS*1e3, row.RecoveryMax*1e3)
	return 0
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
