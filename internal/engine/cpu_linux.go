package engine

import "golang.org/x/sys/unix"

// boundCPU returns the CPU this process is bound to, or −1 when it may run
// on more than one (or the affinity cannot be read).
func boundCPU() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil || set.Count() != 1 {
		return -1
	}
	for c := 0; ; c++ {
		if set.IsSet(c) {
			return c
		}
	}
}
