package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// ringtailCLI runs `ringtail args...` in this process.
func ringtailCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// goStyleFlag matches a flag line of Go's flag.PrintDefaults: one dash
// before a name of several letters ("  -hostfile string"); -np, as mpirun
// spells it, is the one exception.
var goStyleFlag = regexp.MustCompile(`(?m)^  -(?:[a-mo-z][a-z-]+|n[a-oq-z][a-z-]*|np[a-z-]+)`)

// Every subcommand's --help is "Usage: ringtail NAME ..." on stdout with
// exit 0, then its flags spelled as the README spells them (-np, -b,
// --json), never Go's bare "Usage of ..." nor an empty "Flags:".
func TestEveryHelpHasTheSameShape(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		name  string   // after "Usage: "
		flags []string // some flags the help must list
	}{
		{[]string{"run"}, "ringtail run", []string{"-np int", "-H host:slots", "--hostfile file", "--elastic", "-x NAME", "--env K=V", "--timeout duration"}},
		{[]string{"dashboard"}, "ringtail dashboard", []string{"--ranks addresses", "--listen host:port"}},
		{[]string{"timeline"}, "ringtail timeline merge", []string{"-o file"}},
		{[]string{"timeline", "merge"}, "ringtail timeline merge", []string{"-o file"}},
		{[]string{"coordinator"}, "ringtail coordinator", []string{"--listen host:port", "-np int"}},
		{[]string{"bench"}, "ringtail bench allreduce|allgather|broadcast|reducescatter|alltoall", []string{"-np int", "-b string", "-e string", "--json", "--dump-plan int"}},
		{[]string{"bench", "allreduce"}, "ringtail bench allreduce", []string{"-np int", "-b string", "-e string", "-f string", "-d string", "--json", "--no-shm"}},
		{[]string{"bench", "alltoall"}, "ringtail bench alltoall", []string{"-np int", "-b string"}},
		{[]string{"bench", "balance"}, "ringtail bench balance", []string{"--exec string", "--json"}},
		{[]string{"bench", "straggler"}, "ringtail bench straggler", []string{"--ranks string", "--patterns string"}},
		{[]string{"bench", "recovery"}, "ringtail bench recovery", []string{"-np int", "--victim int"}},
		{[]string{"bench", "gradcode"}, "ringtail bench gradcode", []string{"--speeds string", "--iters int"}},
		{[]string{"sim"}, "ringtail sim", []string{"--ranks string", "--json"}},
		{[]string{"gradcode"}, "ringtail gradcode plan", []string{"-n int", "-s int", "--stragglers ranks"}},
		{[]string{"gradcode", "plan"}, "ringtail gradcode plan", []string{"-n int", "--throughput throughputs"}},
		{[]string{"version"}, "ringtail version", nil},
		{[]string{"info"}, "ringtail info", []string{"--json", "--nvml-library path"}},
	} {
		for _, help := range []string{"--help", "-h"} {
			code, out, errs := ringtailCLI(append(append([]string{}, tc.args...), help)...)
			what := strings.Join(tc.args, " ") + " " + help
			if code != 0 || errs != "" {
				t.Errorf("%s: exit %d, stderr %q", what, code, errs)
			}
			if !strings.HasPrefix(out, "Usage: "+tc.name) {
				t.Errorf("%s: help starts %q, want %q", what, firstLine(out), "Usage: "+tc.name)
			}
			if strings.Contains(out, "Usage of") || strings.HasSuffix(strings.TrimSpace(out), "Flags:") {
				t.Errorf("%s: Go's bare usage or an empty flag list:\n%s", what, out)
			}
			if m := goStyleFlag.FindString(out); m != "" {
				t.Errorf("%s: flag %q has one dash; the README spells it with two", what, strings.TrimSpace(m))
			}
			for _, f := range tc.flags {
				if !strings.Contains(out, "\n  "+f+"\n") && !strings.Contains(out, "\n  "+f) {
					t.Errorf("%s: help does not list %q:\n%s", what, f, out)
				}
			}
		}
	}
	code, out, _ := ringtailCLI("--help")
	for _, want := range []string{"--elastic", "-x NAME", "--env K=V", "bench allreduce|allgather|broadcast|reducescatter|alltoall"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("ringtail --help lacks %q", want)
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// The mistakes of issue 31 item 4 are each one line that names the fix.
func TestUsageErrorsNameTheFix(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "allreduce", "-b", "1G"}, "ringtail bench allreduce: -b 1G is larger than -e 64M (the default): give a larger -e too, e.g. -b 1G -e 1G"},
		{[]string{"bench", "allreduce", "-b", "2M", "-e", "1M"}, "-b 2M is larger than -e 1M: give a larger -e too, e.g. -b 2M -e 2M"},
		{[]string{"bench", "allreduce", "--foo"}, "ringtail bench allreduce: unknown flag --foo (run 'ringtail bench allreduce --help')"},
		{[]string{"bench", "balance", "--foo"}, "ringtail bench balance: unknown flag --foo"},
		{[]string{"bench", "straggler", "--jsn"}, "ringtail bench straggler: unknown flag --jsn; did you mean --json?"},
		{[]string{"bench", "straggler", "--reassign-at", "0.1"}, "ringtail bench straggler: --reassign-at applies with --reassign-unit"},
		{[]string{"bench", "recovery", "--pace", "5"}, "ringtail bench recovery: --pace 5: a duration needs a unit: use 5s"},
		{[]string{"bench", "allreduce", "-np", "0"}, "-np 0: the number of ranks must be in 1..256"},
		{[]string{"bench", "allreduce", "-f", "1"}, "-f \"1\": the size factor must be a whole number ≥ 2"},
		{[]string{"bench", "allreduce", "-e", "4G", "-np", "256"}, "ringtail bench allreduce: -e 4G needs about"},
		{[]string{"bench", "alltoal"}, `ringtail bench: unknown benchmark "alltoal": want allreduce, allgather, broadcast, reducescatter, alltoall, balance`},
		{[]string{"sim", "--ranks"}, "ringtail sim: --ranks needs a value"},
		{[]string{"dashboard", "--json"}, "ringtail dashboard: unknown flag --json"},
		{[]string{"gradcode", "plan", "-n", "x"}, `ringtail gradcode plan: -n "x" is not a whole number`},
		{[]string{"version", "extra"}, `ringtail version: unexpected argument "extra"`},
	} {
		code, out, errs := ringtailCLI(tc.args...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("ringtail %s: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", strings.Join(tc.args, " "), code, out, errs, tc.want)
		}
	}
}
