//go:build linux

package launch

import (
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

func TestEndingSeesAZombieWithoutReapingIt(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if ending(pid) {
		t.Fatal("a running child reported ended")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Block until it is a zombie, leaving it unreaped.
	var info unix.Siginfo
	for {
		if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != unix.EINTR {
			if err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if !ending(pid) {
		t.Fatal("a zombie child not reported ended")
	}
	if !ending(pid) {
		t.Fatal("ending reaped the child")
	}
	if err := cmd.Wait(); err == nil || cmd.ProcessState.Exited() {
		t.Fatalf("Wait = %v, %v: want killed (the zombie was still there to reap)", err, cmd.ProcessState)
	}
	if !ending(pid) {
		t.Fatal("a reaped child (no child of ours any more) not reported ended")
	}
}

func TestParseStat(t *testing.T) {
	state, flags, ok := parseStat([]byte("4242 (a (b) c) R 1 4242 4242 0 -1 4194564 120 0 0 0"))
	if !ok || state != 'R' || flags != 4194564 || flags&pfExiting != pfExiting {
		t.Fatalf("parseStat = %c, %d, %v", state, flags, ok)
	}
	if _, _, ok := parseStat([]byte("4242 (x")); ok {
		t.Fatal("a truncated line parsed")
	}
}
