// Command ringtail is the launcher, coordinator, benchmark and inspection
// tool of the ringtail collective-communication runtime. It only wires
// flags to library calls; behaviour lives in packages that tests reach.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = `ringtail — collective communication that routes around stragglers

Usage:
  ringtail run -np N [-H host:slots,...] [--hostfile F] [--secret-file F] [--timeout D]
               [--dashboard ADDR] [--metrics-port P] [--timeline FILE] -- CMD ARGS...
  ringtail dashboard --ranks HOST:P1-P2 [--listen ADDR]
  ringtail timeline merge -o OUT FILE...
  ringtail debug analyze DIR | --ranks HOST:P1-P2
  ringtail coordinator --listen ADDR --np N [--secret-file F]
  ringtail bench allreduce|allgather|broadcast|reducescatter -np N [-b 8] [-e 256M] [-f 2] [-d float32] [--json]
  ringtail bench balance [--json]
  ringtail bench straggler [--ranks 4,8] [--json]
  ringtail bench recovery [--np 4] [--json]
  ringtail bench gradcode [--json]
  ringtail sim [--ranks 64,1024,4096] [--json]
  ringtail gradcode plan --n N --s S [--throughput c1,c2,...] [--json]
  ringtail version

Run 'ringtail COMMAND --help' for the flags of a command.
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

// quietErrors makes a flag set print a bad flag's one-line reason without
// the whole usage; the usage still prints for -h/--help.
func quietErrors(fs *flag.FlagSet, args []string) {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" || a == "--h" {
			return
		}
	}
	fs.Usage = func() {}
}

// parseFlags parses a subcommand's flags (with quietErrors: a flag error
// prints once, -h exits 0) and refuses positional arguments, naming the
// subcommand. When ok is false the subcommand returns code.
func parseFlags(fs *flag.FlagSet, name string, args []string, stderr io.Writer) (code int, ok bool) {
	quietErrors(fs, args)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", name, fs.Arg(0))
		return 2, false
	}
	return 0, true
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
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprintln(stdout, "Usage: ringtail version")
		return 0
	}
	if len(args) > 0 {
		fmt.Fprintln(stderr, "ringtail version: takes no arguments")
		return 2
	}
	fmt.Fprintf(stdout, "ringtail %s\n", version)
	return 0
}
