package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/ringtail-ml/ringtail/internal/cli"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = `ringtail — collective communication that routes around stragglers

Usage:
  ringtail run -np N [-H host:slots,... | --hostfile F] [--secret-file F] [--timeout D]
               [-x NAME] [--env K=V] [--dashboard ADDR] [--metrics-port P] [--timeline FILE] -- CMD ARGS...
  ringtail run --elastic -np N [--min-np N] [--max-np N] [--host-discovery-script S] -- CMD ARGS...
  ringtail dashboard --ranks HOST:P1-P2 [--listen ADDR] [--timeline FILE]
  ringtail timeline merge -o OUT [--torch RANK=TRACE]... FILE...
  ringtail debug analyze DIR | --ranks HOST:P1-P2
  ringtail coordinator --listen ADDR -np N [--secret-file F] [--job-id ID]
  ringtail bench allreduce|allgather|broadcast|reducescatter|alltoall -np N [-b 8] [-e 64M] [-f 2] [-d float32] [--json]
  ringtail bench balance [--json]
  ringtail bench straggler [--ranks 4,8] [--json]
  ringtail bench recovery [-np 4] [--json]
  ringtail bench gradcode [--json]
  ringtail sim [--ranks 64,1024,4096] [--json]
  ringtail gradcode plan --n N --s S [--throughput c1,c2,...] [--json]
  ringtail info [--json]
  ringtail version

Run 'ringtail COMMAND --help' for the flags of a command. Flags are spelled
as here: one dash for -np and one-letter flags, two for the others (either
form is accepted).
`

// subcommand is one top-level command: its arguments, stdout and stderr in,
// exit status out.
type subcommand func(args []string, stdout, stderr io.Writer) int

func commands() map[string]subcommand {
	return map[string]subcommand{
		"run":          runLaunch,
		"coordinator":  runCoordinator,
		"dashboard":    runDashboard,
		"timeline":     runTimeline,
		"debug":        runDebug,
		"bench":        runBench,
		"bench-worker": runBenchWorker,
		"gradcode":     runGradcode,
		"sim":          runSim,
		"info":         runInfo,
		"version":      runVersion,
	}
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands()[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "ringtail: unknown command %q (run 'ringtail --help')\n", args[0])
		return 2
	}
	return cmd(args[1:], stdout, stderr)
}

// parseRanks parses a comma-separated list of world sizes in 1..most.
func parseRanks(list string, most int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > most {
			return nil, fmt.Errorf("%q is not a world size in 1..%d", f, most)
		}
		out = append(out, n)
	}
	return out, nil
}

// splitNames splits a comma-separated list of names; "" is none.
func splitNames(list string) []string {
	if list == "" {
		return nil
	}
	var out []string
	for _, p := range strings.Split(list, ",") {
		out = append(out, strings.TrimSpace(p))
	}
	return out
}

// printJSONLine writes v as one line of JSON.
func printJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

func runVersion(args []string, stdout, stderr io.Writer) int {
	c := cli.New("ringtail version", "Usage: ringtail version\n\nPrints the version of this ringtail binary.\n")
	if code, ok := c.Parse(args, stdout, stderr); !ok {
		return code
	}
	fmt.Fprintf(stdout, "ringtail %s\n", version)
	return 0
}
