//go:build linux

package launch

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ringtail-ml/ringtail/internal/citest"
)

func TestPlaceFillsHostsInOrderWhenRanksAreFewerThanSlots(t *testing.T) {
	hosts := []HostSlots{{Host: "a", Slots: 2}, {Host: "b", Slots: 3}, {Host: "c", Slots: 2}}
	got := place(4, hosts, func(string) bool { return false })
	want := []placement{
		{Rank: 0, Host: "a", LocalRank: 0, LocalWorld: 2, Remote: true},
		{Rank: 1, Host: "a", LocalRank: 1, LocalWorld: 2, Remote: true},
		{Rank: 2, Host: "b", LocalRank: 0, LocalWorld: 2, Remote: true},
		{Rank: 3, Host: "b", LocalRank: 1, LocalWorld: 2, Remote: true},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("place = %+v\nwant %+v", got, want)
	}
	cfg := Config{NP: 8, Hosts: hosts, Command: []string{"x"}}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "-np 8 exceeds the 7 slots") {
		t.Fatalf("Validate = %v", err)
	}
	cfg.NP = 1
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate(-np 1 of 7 slots) = %v", err)
	}
}

func TestRankLogsArePaddedLikeHorovod(t *testing.T) {
	dir := t.TempDir()
	l, err := openRankLogs(dir, 11)
	if err != nil {
		t.Fatal(err)
	}
	l.file(10, true).Write([]byte("x\n"))
	l.close()
	if b, err := os.ReadFile(filepath.Join(dir, "rank.10", "stderr")); err != nil || string(b) != "x\n" {
		t.Fatalf("rank.10/stderr = %q, %v", b, err)
	}
	for _, name := range []string{"rank.00/stdout", "rank.09/stderr"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if l, err := openRankLogs("", 3); l != nil || err != nil || l.file(0, false) != nil {
		t.Fatalf("no directory: %v, %v", l, err)
	}
}

func TestAgentExecsDetectsSSHPrograms(t *testing.T) {
	for _, tc := range []struct {
		ssh  []string
		mode string
		want bool
	}{
		{DefaultSSH(), "", false},
		{[]string{"/usr/bin/ssh", "-p", "2222"}, SSHModeAuto, false},
		{[]string{"autossh"}, "", false},
		{[]string{"sshpass", "-p", "pw", "ssh"}, "", false},
		{[]string{"ip", "netns", "exec"}, "", true},
		{[]string{"docker", "exec", "-i"}, "", true},
		{[]string{"ip", "netns", "exec"}, SSHModeShell, false},
		{DefaultSSH(), SSHModeExec, true},
	} {
		if got := AgentExecs(tc.ssh, tc.mode); got != tc.want {
			t.Errorf("AgentExecs(%q, %q) = %v, want %v", tc.ssh, tc.mode, got, tc.want)
		}
	}
}

func TestExecCommandRunsTheScriptWithoutALoginShell(t *testing.T) {
	r := RemoteRank{Host: "ns1", Command: []string{"sh", "-c", `printf '%s|%s\n' "$RINGTAIL_SECRET" "$1"`, "zero", "it's $HOME"}, Env: []string{"A=b c"}}
	argv := ExecCommand([]string{"ip", "netns", "exec"}, r)
	if !slices.Equal(argv[:6], []string{"ip", "netns", "exec", "ns1", "sh", "-c"}) || len(argv) != 7 || argv[6] != remoteScript(r) {
		t.Fatalf("argv = %q", argv)
	}
	// Run what the agent would run: argv after the host.
	cmd := exec.Command(argv[4], argv[5:]...)
	out, err := runWithSecret(t, cmd, "top secret")
	if err != nil || string(out) != "top secret|it's $HOME\n" {
		t.Fatalf("output %q, %v", out, err)
	}
}

func TestRemoteScriptPinsTheInterface(t *testing.T) {
	if _, err := exec.LookPath("ip"); err != nil {
		citest.Missing(t, "needs ip (iproute2) to read interface addresses")
	}
	r := RemoteRank{Command: []string{"sh", "-c", `echo "$RINGTAIL_LISTEN_IP"`}, Interfaces: []string{"rt-none0", "lo"}}
	cmd := exec.Command("sh", "-c", remoteScript(r))
	if out, err := runWithSecret(t, cmd, "s"); err != nil || string(out) != "127.0.0.1\n" {
		t.Fatalf("output %q, %v", out, err)
	}
	r.Interfaces = []string{"rt-none0"}
	cmd = exec.Command("sh", "-c", remoteScript(r))
	out, _ := runWithSecret(t, cmd, "s")
	if cmd.ProcessState.ExitCode() != 126 || !strings.Contains(string(out), "no IPv4 address on network interface rt-none0") {
		t.Fatalf("status %d, output %q", cmd.ProcessState.ExitCode(), out)
	}
}

// runWithSecret runs a remote script as the launcher does: the secret is
// the first line of standard input, which stays open while the rank runs.
func runWithSecret(t *testing.T, cmd *exec.Cmd, secret string) ([]byte, error) {
	t.Helper()
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	in.Write([]byte(secret + "\n"))
	err = cmd.Wait() // closes in once the script has exited
	return []byte(out.String()), err
}
