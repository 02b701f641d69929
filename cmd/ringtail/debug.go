package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/ringtail-ml/ringtail/internal/flight"
	"github.com/ringtail-ml/ringtail/internal/obs"
)

const debugUsage = `Usage:
  ringtail debug analyze DIR [--json]
  ringtail debug analyze --ranks HOST:P1-P2 [--last N] [--json]

Reads the flight recorder's dumps (one per rank, written into
RINGTAIL_FLIGHT_DIR when a job fails or on SIGUSR1) and tells the story in
a few lines: the rank that stopped calling and the call it never made, or
the first call where ranks disagree, and the failure every rank reported.
With --ranks it reads a live job's ranks instead (their /debug/flight on
the metrics ports, RINGTAIL_METRICS_ADDR). See docs/debugging.md.
`

// runDebug dispatches `ringtail debug SUBCOMMAND`.
func runDebug(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, debugUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] != "analyze" {
		fmt.Fprintf(stderr, "ringtail debug: unknown subcommand %q (want analyze)\n", args[0])
		return 2
	}
	return runDebugAnalyze(args[1:], stdout, stderr)
}

func runDebugAnalyze(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("debug analyze", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, debugUsage) }
	ranks := fs.String("ranks", "", "read a live job: its ranks' metrics addresses (host:9400-9403)")
	last := fs.Int("last", 200, "with --ranks: the calls to read of each rank")
	asJSON := fs.Bool("json", false, "print the reports as JSON")
	timeout := fs.Duration("timeout", 10*time.Second, "with --ranks: how long to wait for each rank")
	// The directory may come before the flags.
	var dir string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		dir, args = args[0], args[1:]
	}
	quietErrors(fs, args)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if dir == "" && fs.NArg() > 0 {
		dir = fs.Arg(0)
	} else if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "debug analyze: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if (dir == "") == (*ranks == "") {
		fmt.Fprint(stderr, "debug analyze: give a dump directory or --ranks (not both)\n\n"+debugUsage)
		return 2
	}
	var dumps []*flight.Dump
	if dir != "" {
		d, err := flight.ReadDir(dir)
		if err != nil {
			fmt.Fprintf(stderr, "debug analyze: %v\n", err)
			return 1
		}
		dumps = d
	} else {
		targets, err := obs.ExpandTargets(*ranks)
		if err != nil {
			fmt.Fprintf(stderr, "debug analyze: --ranks: %v\n", err)
			return 2
		}
		d, errs := obs.FetchFlight(targets, *last, *timeout)
		for _, err := range errs {
			fmt.Fprintf(stderr, "debug analyze: %v\n", err)
		}
		if len(d) == 0 {
			return 1
		}
		dumps = d
	}
	reports := flight.AnalyzeAll(dumps)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(reports); err != nil {
			fmt.Fprintf(stderr, "debug analyze: %v\n", err)
			return 1
		}
		return 0
	}
	for i := range reports {
		reports[i].Write(stdout)
	}
	return 0
}
