//go:build !linux

package engine

// boundCPU cannot read the affinity on this platform: not bound.
func boundCPU() int { return -1 }
