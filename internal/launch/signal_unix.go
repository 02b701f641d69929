//go:build unix

package launch

import (
	"errors"
	"os"
	"syscall"
)

// Signals Run sends to stop a rank.
const (
	sigTerm = syscall.SIGTERM
	sigKill = syscall.SIGKILL
)

// signalGroup sends sig to the process group led by pid (every rank leads
// its own). A group that is already gone is not an error.
func signalGroup(pid int, sig syscall.Signal) error {
	if err := syscall.Kill(-pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// exitStatus returns the status Run reports for a finished process: its
// exit status, or 128+signo and the signal when a signal killed it.
func exitStatus(st *os.ProcessState) (int, syscall.Signal) {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), ws.Signal()
	}
	return st.ExitCode(), 0
}
