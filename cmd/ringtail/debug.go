package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/ringtail-ml/ringtail/internal/cli"
	"github.com/ringtail-ml/ringtail/internal/flight"
	"github.com/ringtail-ml/ringtail/internal/obs"
)

const debugUsage = `Usage: ringtail debug analyze DIR [--json]
       ringtail debug analyze --ranks HOST:P1-P2 [--last N] [--json] [--secret-file F]
       ringtail debug token [--secret-file F]

Reads the flight recorder's dumps (one per rank, written into
RINGTAIL_FLIGHT_DIR when a job fails or on SIGUSR1) and tells the story in
a few lines: the rank that stopped calling and the call it never made, or
the first call where ranks disagree, and the failure every rank reported.
With --ranks it reads a live job's ranks instead (their /debug/flight on
the metrics ports, RINGTAIL_METRICS_ADDR), sending the job's endpoint
token (derived from RINGTAIL_SECRET, RINGTAIL_SECRET_FILE or --secret-file),
which ranks serving beyond loopback require.
"token" prints that token, for a scraper's "Authorization: Bearer TOKEN"
or a browser's /?token=TOKEN. See docs/debugging.md and
docs/observability.md.
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
	switch args[0] {
	case "analyze":
		return runDebugAnalyze(args[1:], stdout, stderr)
	case "token":
		return runDebugToken(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "ringtail debug: unknown subcommand %q (want analyze or token)\n", args[0])
	return 2
}

// runDebugToken is `ringtail debug token`: the job's endpoint token.
func runDebugToken(args []string, stdout, stderr io.Writer) int {
	cmd := cli.New("ringtail debug token", debugUsage)
	secretFile := cmd.Flags.String("secret-file", "", "read the job secret from `file` (default: $RINGTAIL_SECRET, $RINGTAIL_SECRET_FILE)")
	if code, ok := cmd.Parse(args, stdout, stderr); !ok {
		return code
	}
	secret, err := jobSecret(*secretFile)
	if err != nil {
		return cmd.Fail(stderr, "%v", err)
	}
	if len(secret) == 0 {
		return cmd.Fail(stderr, "no job secret: set RINGTAIL_SECRET or RINGTAIL_SECRET_FILE, or give --secret-file")
	}
	fmt.Fprintln(stdout, obs.Token(secret))
	return 0
}

func runDebugAnalyze(args []string, stdout, stderr io.Writer) int {
	cmd := cli.New("ringtail debug analyze", debugUsage)
	fs := cmd.Flags
	ranks := fs.String("ranks", "", "read a live job: its ranks' metrics addresses (`host:9400-9403`)")
	last := fs.Int("last", 200, "with --ranks: the calls to read of each rank")
	asJSON := fs.Bool("json", false, "print the reports as JSON")
	timeout := fs.Duration("timeout", 10*time.Second, "with --ranks: how long to wait for each rank")
	secretFile := fs.String("secret-file", "", "with --ranks: read the job secret from `file` (default: $RINGTAIL_SECRET, $RINGTAIL_SECRET_FILE); its token opens ranks bound beyond loopback")
	// The directory may come before the flags.
	var dir string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		dir, args = args[0], args[1:]
	}
	if code, ok := cmd.ParseArgs(args, stdout, stderr); !ok {
		return code
	}
	switch {
	case dir == "" && fs.NArg() == 1:
		dir = fs.Arg(0)
	case fs.NArg() > 0:
		return cmd.Fail(stderr, "unexpected argument %q", fs.Arg(0))
	}
	if (dir == "") == (*ranks == "") {
		return cmd.Fail(stderr, "give a dump directory or --ranks (not both)")
	}
	var dumps []*flight.Dump
	if dir != "" {
		d, err := flight.ReadDir(dir)
		if err != nil {
			fmt.Fprintf(stderr, "ringtail debug analyze: %v\n", err)
			return 1
		}
		dumps = d
	} else {
		targets, err := obs.ExpandTargets(*ranks)
		if err != nil {
			return cmd.Fail(stderr, "--ranks: %v", err)
		}
		secret, err := jobSecret(*secretFile)
		if err != nil {
			return cmd.Fail(stderr, "%v", err)
		}
		d, errs := obs.FetchFlight(targets, obs.Token(secret), *last, *timeout)
		for _, err := range errs {
			fmt.Fprintf(stderr, "ringtail debug analyze: %v\n", err)
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
			fmt.Fprintf(stderr, "ringtail debug analyze: %v\n", err)
			return 1
		}
		return 0
	}
	for i := range reports {
		reports[i].Write(stdout)
	}
	return 0
}
