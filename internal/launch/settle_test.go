//go:build linux

package launch

import (
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

func TestEndedUnreapedSeesAZombieWithoutReapingIt(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if endedUnreaped(pid) {
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
	if !endedUnreaped(pid) {
		t.Fatal("a zombie child not reported ended")
	}
	if !endedUnreaped(pid) {
		t.Fatal("endedUnreaped reaped the child")
	}
	if err := cmd.Wait(); err == nil || cmd.ProcessState.Exited() {
		t.Fatalf("Wait = %v, %v: want killed (the zombie was still there to reap)", err, cmd.ProcessState)
	}
	if !endedUnreaped(pid) {
		t.Fatal("a reaped child (no child of ours any more) not reported ended")
	}
}
