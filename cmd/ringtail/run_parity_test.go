//go:build unix

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The horovodrun/mpirun parity flags of `ringtail run` (issue 13 item 5).

func TestRunCLIFewerRanksThanSlotsFillHostsInOrder(t *testing.T) {
	code, stdout, _ := launchCLI(t, context.Background(), "-np", "3", "-H", "localhost:2,127.0.0.1:2", "--",
		"sh", "-c", `echo "$RANK/$WORLD_SIZE $LOCAL_RANK/$LOCAL_WORLD_SIZE"`)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	// localhost takes ranks 0 and 1; 127.0.0.1 only rank 2, alone on it.
	for _, want := range []string{"[0] 0/3 0/2\n", "[1] 1/3 1/2\n", "[2] 2/3 0/1\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	if n := strings.Count(stdout, "\n"); n != 3 {
		t.Errorf("%d ranks ran, want 3", n)
	}
}

func TestRunCLIOutputFilenameWritesOneLogPerRank(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	code, stdout, stderr := launchCLI(t, context.Background(), "-np", "2", "--output-filename", dir, "--",
		"sh", "-c", `echo "out of $RANK"; echo "err of $RANK" >&2`)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, r := range []string{"0", "1"} {
		for name, want := range map[string]string{"stdout": "out of " + r + "\n", "stderr": "err of " + r + "\n"} {
			b, err := os.ReadFile(filepath.Join(dir, "rank."+r, name))
			if err != nil || string(b) != want {
				t.Errorf("rank.%s/%s = %q, %v; want %q", r, name, b, err, want)
			}
		}
	}
	// The terminal still gets every line, prefixed.
	if !strings.Contains(stdout, "[1] out of 1\n") || !strings.Contains(stderr, "[0] err of 0\n") {
		t.Errorf("terminal output lacks the ranks' lines")
	}
}

func TestRunCLIOutputFilenameUnwritable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	os.WriteFile(file, nil, 0o644)
	code, _, stderr := launchCLI(t, context.Background(), "-np", "1", "--output-filename", file, "--", "true")
	if code != 1 || !strings.Contains(stderr, "ringtail run: --output-filename:") {
		t.Fatalf("exit %d, stderr %q: want 1 and the reason", code, stderr)
	}
}

func TestRunCLIStartTimeoutReachesTheRanks(t *testing.T) {
	code, stdout, _ := launchCLI(t, context.Background(), "-np", "1", "--start-timeout", "1500ms", "--",
		"sh", "-c", `echo "connect=$RINGTAIL_CONNECT_TIMEOUT"`)
	if code != 0 || stdout != "[0] connect=1.5s\n" {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
}

func TestRunCLINetworkInterfacePinsLocalRanks(t *testing.T) {
	for _, flag := range []string{"--network-interface", "--nics"} {
		code, stdout, _ := launchCLI(t, context.Background(), "-np", "2", flag, "rt-no-such0,lo", "--",
			"sh", "-c", `echo "listen=$RINGTAIL_LISTEN_IP"`)
		if code != 0 || !strings.Contains(stdout, "[0] listen=127.0.0.1\n") || !strings.Contains(stdout, "[1] listen=127.0.0.1\n") {
			t.Errorf("%s: exit %d, stdout %q", flag, code, stdout)
		}
	}
	code, _, stderr := launchCLI(t, context.Background(), "-np", "1", "--nics", "rt-no-such0", "--", "true")
	if code != 1 || !strings.Contains(stderr, "cannot start rank 0") || !strings.Contains(stderr, "rt-no-such0") {
		t.Errorf("missing interface: exit %d, stderr %q", code, stderr)
	}
}

func TestRunCLIExecAgentRunsRemoteRanks(t *testing.T) {
	// An agent in the manner of `ip netns exec NS CMD...`: it takes the
	// host and runs the rest as a program, with no login shell between.
	agent := filepath.Join(t.TempDir(), "fakeexec")
	os.WriteFile(agent, []byte("#!/bin/sh\nshift\nexec \"$@\"\n"), 0o755)
	code, stdout, _ := launchCLI(t, context.Background(), "-H", "ns-a:1,ns-b:1", "--ssh", agent, "--master-addr", "127.0.0.1",
		"--nics", "lo", "--", "sh", "-c", `echo "$RANK ${#RINGTAIL_SECRET} $RINGTAIL_LISTEN_IP it's"`)
	if code != 0 || !strings.Contains(stdout, "[0] 0 64 127.0.0.1 it's\n") || !strings.Contains(stdout, "[1] 1 64 127.0.0.1 it's\n") {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
	// Forced into shell mode, the same agent gets one command line it
	// cannot run as a program.
	code, _, _ = launchCLI(t, context.Background(), "-H", "ns-a:1", "--ssh", agent, "--ssh-mode", "shell", "--master-addr", "127.0.0.1", "--", "true")
	if code == 0 {
		t.Fatal("shell mode through an exec agent succeeded")
	}
}

func TestRunCLIHelpDescribesTheFlagDefaults(t *testing.T) {
	_, stdout, _ := launchCLI(t, context.Background(), "--help")
	for _, want := range []string{
		"-bind-to string\n", "(default \"core\")", "outnumber them",
		"-ssh-mode string", "(default \"auto\")", "-output-filename DIR", "-start-timeout duration", "-nics string", "-network-interface interfaces",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}
