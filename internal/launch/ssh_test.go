//go:build unix

package launch

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringtail-ml/ringtail/internal/syncbuf"
)

// nastyWords are words a shell must receive unchanged.
func nastyWords() []string {
	return []string{
		"plain", "", " ", "two words", "it's", `"double"`, `back\slash`, "$HOME", "${PATH}", "`id`", "$(id)",
		"a;b", "a&&b", "a|b", "<in", ">out", "*", "?", "[a]", "~", "~root", "#hash", "!bang", "x=y",
		"tab\there", "new\nline", "'", "''", `'"'"'`, "--flag", "-", "ünïcödé", "%s", "{a,b}",
	}
}

func TestShellQuoteRoundTripsThroughSh(t *testing.T) {
	nasty := nastyWords()
	// One level, as for the words of the rank command...
	script := "printf '%s\\0' " + shellJoin(nasty)
	out, err := exec.Command("sh", "-c", script).Output()
	if err != nil {
		t.Fatalf("sh: %v", err)
	}
	if got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00"); !slices.Equal(got, nasty) {
		t.Fatalf("one level: got %q\nwant %q", got, nasty)
	}
	// ...and two, as ssh's remote command `sh -c '<script>'` is.
	out, err = exec.Command("sh", "-c", "sh -c "+shellQuote(script)).Output()
	if err != nil {
		t.Fatalf("sh: %v", err)
	}
	if got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00"); !slices.Equal(got, nasty) {
		t.Fatalf("two levels: got %q\nwant %q", got, nasty)
	}
}

func TestShellQuoteLeavesSafeWordsAlone(t *testing.T) {
	for in, want := range map[string]string{
		"python3": "python3", "/usr/bin/env": "/usr/bin/env", "--lr=0.1": "'--lr=0.1'", "a b": "'a b'",
		"it's": `'it'"'"'s'`, "": "''", "host:2,x@y": "host:2,x@y",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestSSHCommandShape(t *testing.T) {
	r := RemoteRank{Host: "gpu1", Dir: "/data/my job", Env: []string{"RANK=1", "X=a b"}, Command: []string{"python", "train.py"}, Grace: 5 * time.Second}
	argv := SSHCommand(DefaultSSH(), r)
	if !slices.Equal(argv[:4], []string{"ssh", "-o", "BatchMode=yes", "gpu1"}) || len(argv) != 5 {
		t.Fatalf("argv = %q", argv)
	}
	if !strings.HasPrefix(argv[4], "sh -c '") {
		t.Fatalf("remote command %q does not start with sh -c '...'", argv[4])
	}
	// The script is valid sh.
	if out, err := exec.Command("sh", "-n", "-c", remoteScript(r)).CombinedOutput(); err != nil {
		t.Fatalf("sh -n: %v\n%s\n%s", err, out, remoteScript(r))
	}
	// SSHCommand does not alias the caller's ssh slice.
	ssh := make([]string, 1, 8)
	ssh[0] = "myssh"
	a := SSHCommand(ssh, r)
	b := SSHCommand(ssh, RemoteRank{Host: "other", Command: []string{"x"}})
	if a[1] != "gpu1" || b[1] != "other" {
		t.Fatalf("argv aliased: %q %q", a, b)
	}
}

// runRemote runs SSHCommand's remote command under sh, as a login shell
// would, with stdin a pipe whose write end the caller gets.
func runRemote(t *testing.T, r RemoteRank) (cmd *exec.Cmd, stdin *os.File, out *syncbuf.Buffer) {
	t.Helper()
	argv := SSHCommand([]string{"ssh"}, r)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	out = new(syncbuf.Buffer)
	cmd = exec.Command("sh", "-c", argv[len(argv)-1])
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pr, out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	t.Cleanup(func() { pw.Close(); cmd.Process.Kill(); cmd.Wait() })
	return cmd, pw, out
}

func TestRemoteScriptExportsSecretEnvAndDir(t *testing.T) {
	nasty := nastyWords()
	dir := t.TempDir() + "/a dir with 'quotes'"
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := RemoteRank{
		Dir: dir, Env: []string{"A=" + strings.Join(nasty, "|"), "B=x=y"},
		Command: []string{"sh", "-c", `printf '%s\n' "$RINGTAIL_SECRET" "$A" "$B" "$(pwd)" "$1"; exit 7`, "zero", "it's $1"},
	}
	cmd, stdin, out := runRemote(t, r)
	secret := `s3cr'et $x "y"`
	stdin.Write([]byte(secret + "\n"))
	err := cmd.Wait()
	if cmd.ProcessState.ExitCode() != 7 {
		t.Fatalf("exit: %v (want status 7)\n%s", err, out)
	}
	want := strings.Join([]string{secret, strings.Join(nasty, "|"), "x=y", dir, "it's $1"}, "\n") + "\n"
	if out.String() != want {
		t.Fatalf("remote output\n%q\nwant\n%q", out.String(), want)
	}
}

func TestRemoteScriptStopsRankWhenStdinCloses(t *testing.T) {
	// The rank traps SIGTERM and says so: closing stdin must deliver it.
	// The minute's grace leaves the handler all the time a loaded machine
	// needs; a SIGKILL at its end would show as status 137.
	r := RemoteRank{Command: []string{"sh", "-c", `trap 'echo got TERM; exit 9' TERM; echo up; while :; do sleep 0.05; done`}, Grace: time.Minute}
	cmd, stdin, out := runRemote(t, r)
	stdin.Write([]byte("secret\n"))
	waitFor(t, func() bool { return strings.Contains(out.String(), "up") })
	stdin.Close()
	cmd.Wait()
	if got := cmd.ProcessState.ExitCode(); got != 9 || !strings.Contains(out.String(), "got TERM") {
		t.Fatalf("status %d, output %q: want the rank's own TERM handler (status 9)", got, out)
	}
}

func TestRemoteScriptKillsRankIgnoringTERMAfterGrace(t *testing.T) {
	r := RemoteRank{Command: []string{"sh", "-c", `trap '' TERM; echo up; while :; do sleep 0.05; done`}, Grace: time.Second}
	cmd, stdin, out := runRemote(t, r)
	stdin.Write([]byte("secret\n"))
	waitFor(t, func() bool { return strings.Contains(out.String(), "up") })
	start := time.Now()
	stdin.Close()
	cmd.Wait()
	d := time.Since(start)
	if got := cmd.ProcessState.ExitCode(); got != 128+9 {
		t.Fatalf("status %d, want 137 (SIGKILL)", got)
	}
	if d < 900*time.Millisecond {
		t.Fatalf("killed after %v, before the 1s grace", d)
	}
}

func TestRemoteScriptExitsWithoutSecret(t *testing.T) {
	cmd, stdin, _ := runRemote(t, RemoteRank{Command: []string{"true"}})
	stdin.Close()
	cmd.Wait()
	if got := cmd.ProcessState.ExitCode(); got != 126 {
		t.Fatalf("status %d, want 126 when stdin ends before the secret", got)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
