//go:build !race

package slurm

// raceEnabled: this test binary is built with -race.
const raceEnabled = false
