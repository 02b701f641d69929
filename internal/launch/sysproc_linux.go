//go:build linux

package launch

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcAttr puts a rank in its own process group, so that signals to
// the group reach everything it started, and has the kernel kill it if
// the thread that started it dies (the launcher is killed -9, say). The
// starting goroutine stays locked to its thread while the rank runs,
// since Pdeathsig follows the thread, not the process.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// allowedCPUs lists the CPUs this process may run on.
func allowedCPUs() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil
	}
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// withCPU runs start with the calling thread (locked by the caller) bound
// to cpu, so the process it forks inherits the binding, then restores the
// thread's affinity.
func withCPU(cpu int, start func() error) error {
	var old, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return start()
	}
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		return start()
	}
	defer unix.SchedSetaffinity(0, &old)
	return start()
}

// endedUnreaped reports whether the child pid has ended but not been
// reaped yet (a zombie), without reaping it: waitid with WNOWAIT. A pid
// that is no child of this process any more (ECHILD: reaped meanwhile by
// its wait goroutine) has ended too.
func endedUnreaped(pid int) bool {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.ECHILD:
			return true
		case err != nil:
			return false
		}
		// With WNOHANG and nothing to report, the kernel writes a zero
		// signal number (SIGCHLD when the child has ended).
		return info.Signo != 0
	}
}
