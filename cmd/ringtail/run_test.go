//go:build unix

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// launchCLI runs `ringtail run args...` until ctx ends.
func launchCLI(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	if len(args) > 0 && args[0] == "--elastic" && !slices.Contains(args, "--elastic-state-dir") {
		// Not .ringtail/JOB-ID under the package's directory.
		args = append([]string{"--elastic", "--elastic-state-dir", t.TempDir()}, args[1:]...)
	}
	var out, errb runTestBuffer
	code = launchMain(ctx, args, &out, &errb)
	t.Logf("ringtail run %q = %d\nstdout:\n%sstderr:\n%s", args, code, out.String(), errb.String())
	return code, out.String(), errb.String()
}

func TestRunCLIStartsPrefixedRanks(t *testing.T) {
	code, stdout, stderr := launchCLI(t, context.Background(), "-np", "2", "--",
		"sh", "-c", `echo "rank=$RANK of $WORLD_SIZE local=$LOCAL_RANK/$LOCAL_WORLD_SIZE coord=$RINGTAIL_COORDINATOR"; echo oops >&2`)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"[0] rank=0 of 2 local=0/2 coord=external\n", "[1] rank=1 of 2 local=1/2 coord=external\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	if !strings.Contains(stderr, "[0] oops\n") || !strings.Contains(stderr, "[1] oops\n") {
		t.Error("stderr lacks the ranks' prefixed lines")
	}
}

func TestRunCLIFailingRankStopsTheOthers(t *testing.T) {
	// The others would sleep ten minutes; the launcher must stop them with
	// SIGTERM, well within the minute's grace after which it would kill
	// them (and say so).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // hang detector
	defer cancel()
	code, _, stderr := launchCLI(t, ctx, "-np", "3", "--grace", "1m", "--",
		"sh", "-c", `if [ "$RANK" = 2 ]; then sleep 0.2; exit 3; fi; exec sleep 600`)
	if code != 3 {
		t.Fatalf("exit %d, want 3", code)
	}
	if want := "ringtail run: rank 2 exited with status 3; stopping the other ranks\n"; !strings.Contains(stderr, want) {
		t.Fatalf("stderr lacks %q", want)
	}
	if strings.Contains(stderr, "did not stop within") {
		t.Fatal("the other ranks outlived their grace: SIGTERM did not stop them")
	}
}

func TestRunCLIEnvironmentFlags(t *testing.T) {
	t.Setenv("RT_CLI_EXPORTED", "from launcher")
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("  topsecret-0123456789\n"), 0o600)
	code, stdout, _ := launchCLI(t, context.Background(), "-np", "1", "--env", "A=1", "--env", "B=two words",
		"-x", "RT_CLI_EXPORTED", "-x", "C=3", "--timeout", "2m", "--secret-file", secret, "--",
		"sh", "-c", `echo "$A|$B|$RT_CLI_EXPORTED|$C|$RINGTAIL_TIMEOUT|$RINGTAIL_SECRET"`)
	if want := "[0] 1|two words|from launcher|3|2m0s|topsecret-0123456789\n"; code != 0 || stdout != want {
		t.Fatalf("exit %d, stdout %q, want %q", code, stdout, want)
	}
}

func TestRunCLIHostfileGivesNP(t *testing.T) {
	hostfile := filepath.Join(t.TempDir(), "hosts")
	os.WriteFile(hostfile, []byte("# local\nlocalhost slots=2\n"), 0o644)
	code, stdout, _ := launchCLI(t, context.Background(), "--hostfile", hostfile, "--", "sh", "-c", `echo "$RANK/$WORLD_SIZE/$LOCAL_WORLD_SIZE"`)
	if code != 0 || !strings.Contains(stdout, "[0] 0/2/2\n") || !strings.Contains(stdout, "[1] 1/2/2\n") {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
}

func TestRunCLIRejectsBadUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-np", "x", "--", "true"}, `-np "x" is not a whole number`},
		{[]string{"--bogus", "-np", "1", "--", "true"}, "unknown flag --bogus (run 'ringtail run --help')"},
		{[]string{"--timeout", "5", "-np", "1", "--", "true"}, "--timeout 5: a duration needs a unit: use 5s"},
		{[]string{"--timeot", "5s", "-np", "1", "--", "true"}, "unknown flag --timeot; did you mean --timeout?"},
		{[]string{"-np", "2"}, "no command given"},
		{[]string{"--", "true"}, "-np is required"},
		{[]string{"-np", "3", "-H", "a:2", "--", "true"}, "invalid config: -np 3 exceeds the 2 slots"},
		{[]string{"-np", "1", "--ssh-mode", "rsh", "--", "true"}, `ssh mode "rsh" must be auto, shell or exec`},
		{[]string{"-np", "1", "--start-timeout", "-1s", "--", "true"}, "--start-timeout -1s must not be negative"},
		{[]string{"-np", "1", "--nics", "eth0;rm", "--", "true"}, `network interface name "eth0;rm" contains`},
		{[]string{"-np", "1", "--nics", "lo", "-x", "RINGTAIL_LISTEN_IP=1.2.3.4", "--", "true"}, "conflicts with the network interfaces lo"},
		{[]string{"-np", "1", "--start-timeout", "1s", "--env", "RINGTAIL_CONNECT_TIMEOUT=5s", "--", "true"}, "conflicts with the start timeout 1s"},
		{[]string{"-H", "a:2", "--hostfile", "f", "--", "true"}, "not both"},
		{[]string{"-H", "a:0", "--", "true"}, "-H: bad host list"},
		{[]string{"--hostfile", "/nonexistent/hosts", "--", "true"}, "--hostfile"},
		{[]string{"-np", "1", "-x", "RT_CLI_SURELY_UNSET", "--", "true"}, "-x RT_CLI_SURELY_UNSET: not set"},
		{[]string{"-np", "1", "--env", "RANK=1", "--", "true"}, "RANK is set by the launcher"},
		{[]string{"-np", "1", "--env", "NOEQUALS", "--", "true"}, "not NAME=VALUE"},
		{[]string{"-np", "1", "--grace", "0s", "--", "true"}, "--grace 0s must be positive"},
		{[]string{"-np", "1", "--secret-file", "/nonexistent/secret", "--", "true"}, "--secret-file"},
		{[]string{"-np", "0", "--", "true"}, "-np 0: a job needs at least one rank, e.g. -np 4"},
		{[]string{"-np", "1", "--ssh", " ", "--", "true"}, "--ssh is empty"},
		{[]string{"-np", "-1", "--", "true"}, "-np -1: a job needs at least one rank"},
	} {
		code, _, stderr := launchCLI(t, context.Background(), tc.args...)
		if code != 2 || !strings.HasPrefix(stderr, "ringtail run: ") || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("ringtail run %q: exit %d, stderr %q; want 2 and one line mentioning %q", tc.args, code, stderr, tc.want)
		}
	}
}

func TestRunCLIHelp(t *testing.T) {
	code, stdout, _ := launchCLI(t, context.Background(), "--help")
	if code != 0 || !strings.Contains(stdout, "Usage: ringtail run") || !strings.Contains(stdout, "-hostfile") {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
}

func TestRunCLISignalStopsEveryRank(t *testing.T) {
	// SIGTERM to the launcher (this process) once every rank runs: the
	// ranks are stopped and the exit status is 128+SIGTERM.
	dir := t.TempDir()
	go func() {
		for {
			if m, _ := filepath.Glob(filepath.Join(dir, "r*")); len(m) == 2 {
				syscall.Kill(os.Getpid(), syscall.SIGTERM)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	var out, errb runTestBuffer
	code := runLaunch([]string{"-np", "2", "--env", "DIR=" + dir, "--", "sh", "-c", `touch "$DIR/r$RANK"; exec sleep 30`}, &out, &errb)
	if code != 128+int(syscall.SIGTERM) || !strings.Contains(errb.String(), "ringtail run: interrupted; stopping the ranks") {
		t.Fatalf("exit %d, stderr %q; want %d", code, errb.String(), 128+int(syscall.SIGTERM))
	}
}

func TestRunCLIRemoteHostsOverSSH(t *testing.T) {
	// A stand-in for ssh that runs the remote command with sh: the
	// launcher's quoting, secret passing and environment reach the rank.
	fake := filepath.Join(t.TempDir(), "fakessh")
	os.WriteFile(fake, []byte("#!/bin/sh\n# fakessh [-o opt] host command\n[ \"$1\" = -o ] && shift 2\nshift\nexec env -i PATH=\"$PATH\" sh -c \"$1\"\n"), 0o755)
	t.Setenv("RT_CLI_EXPORTED", "it's exported")
	code, stdout, _ := launchCLI(t, context.Background(), "-H", "localhost:1,node-a:2", "--ssh", fake+" -o BatchMode=yes",
		"--master-addr", "127.0.0.1", "-x", "RT_CLI_EXPORTED", "--",
		"sh", "-c", `echo "$RANK $LOCAL_RANK/$LOCAL_WORLD_SIZE $MASTER_ADDR $RINGTAIL_COORDINATOR ${#RINGTAIL_SECRET} $RT_CLI_EXPORTED"`)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{
		"[0] 0 0/1 127.0.0.1 external 64 it's exported\n",
		"[1] 1 0/2 127.0.0.1 external 64 it's exported\n",
		"[2] 2 1/2 127.0.0.1 external 64 it's exported\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
}

// Issue 31: a --metrics-port whose range is taken on this host is one line
// before any rank starts (it was a rank's failure, then its peers' "context
// canceled" and the coordinator's warnings).
func TestRunCLIRefusesAMetricsPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().(*net.TCPAddr).Port
	base := taken - 1 // rank 1's port is taken
	code, stdout, stderr := launchCLI(t, context.Background(), "-np", "2", "--metrics-port", strconv.Itoa(base), "--", "sh", "-c", "echo started")
	want := fmt.Sprintf("ringtail run: --metrics-port %d: port %d (rank 1, the port + its local rank) is in use on this host: choose another port", base, taken)
	if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, want) {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and one line starting %q", code, stdout, stderr, want)
	}
}
