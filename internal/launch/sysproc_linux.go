//go:build linux

package launch

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
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

// pfExiting is the kernel's PF_EXITING task flag: the task has begun to
// exit (do_exit), e.g. on a fatal signal.
const pfExiting = 0x4

// ending reports whether the child pid has begun to exit, without reaping
// it: its /proc/<pid>/stat shows a zombie (or dead) task, or the leader
// thread's PF_EXITING flag. A pid that is gone (reaped meanwhile by its
// wait goroutine) has ended too. A process killed by a signal closes its
// sockets (which is how its peers learn of its death) only after every
// one of its threads has begun to exit, so from then on it reads as
// ending here, even before the kernel makes it a zombie.
func ending(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return true
	}
	if err != nil {
		return false
	}
	state, flags, ok := parseStat(b)
	return ok && (state == 'Z' || state == 'X' || state == 'x' || flags&pfExiting != 0)
}

// parseStat returns the state and flags fields of a /proc/<pid>/stat line
// (the command name, in parentheses, may hold spaces and parentheses).
func parseStat(b []byte) (state byte, flags uint64, ok bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	// state ppid pgrp session tty_nr tpgid flags ...
	if len(f) < 7 || len(f[0]) != 1 {
		return 0, 0, false
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], flags, true
}
