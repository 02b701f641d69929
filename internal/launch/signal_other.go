//go:build !unix

package launch

import (
	"os"
	"syscall"
)

// Without process groups or signals, stopping a rank kills it.
const (
	sigTerm = syscall.Signal(0xf)
	sigKill = syscall.Signal(0x9)
)

// sysProcAttr has nothing to set here.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// signalGroup cannot address a group here; terminate and kill both kill
// the rank itself.
func signalGroup(pid int, sig syscall.Signal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return nil
	}
	return p.Kill()
}

// exitStatus returns the process's exit status.
func exitStatus(st *os.ProcessState) (int, syscall.Signal) { return st.ExitCode(), 0 }

// allowedCPUs is unknown on this platform: ranks are not bound.
func allowedCPUs() []int { return nil }

// withCPU cannot bind on this platform; it just starts.
func withCPU(cpu int, start func() error) error { return start() }
