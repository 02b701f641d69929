//go:build unix && !linux

package launch

import "syscall"

// sysProcAttr puts a rank in its own process group, so that signals to
// the group reach everything it started. Without Pdeathsig, a rank
// outlives a launcher killed with -9 here.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
