//go:build unix && !linux

package launch

import "syscall"

// sysProcAttr puts a rank in its own process group, so that signals to
// the group reach everything it started. Without Pdeathsig, a rank
// outlives a launcher killed with -9 here.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// allowedCPUs is unknown on this platform: ranks are not bound.
func allowedCPUs() []int { return nil }

// withCPU cannot bind on this platform; it just starts.
func withCPU(cpu int, start func() error) error { return start() }

// ending is not known on this platform without reaping the child: only
// ranks already reaped count as ended (see proc.ended).
func ending(pid int) bool { return false }
