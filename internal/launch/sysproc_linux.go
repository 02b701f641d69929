//go:build linux

package launch

import "syscall"

// sysProcAttr puts a rank in its own process group, so that signals to
// the group reach everything it started, and has the kernel kill it if
// the thread that started it dies (the launcher is killed -9, say). The
// starting goroutine stays locked to its thread while the rank runs,
// since Pdeathsig follows the thread, not the process.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
