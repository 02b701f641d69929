package nvml

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// CPUTimes is the aggregate "cpu" line of /proc/stat: time spent by all
// CPUs together in each state since boot, in USER_HZ ticks. Guest time is
// already counted in User and Nice by the kernel and is not kept.
type CPUTimes struct {
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal uint64
}

// ParseProcStat extracts the aggregate CPU times from the text of
// /proc/stat. Kernels older than 2.6.11 print fewer than eight columns; the
// missing ones read as zero. At least the first four are required.
func ParseProcStat(text []byte) (CPUTimes, error) {
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "cpu" {
			continue
		}
		cols := fields[1:]
		if len(cols) < 4 {
			return CPUTimes{}, fmt.Errorf("%w /proc/stat: cpu line has %d columns, want at least 4", ErrParse, len(cols))
		}
		var v [8]uint64
		for i := 0; i < len(v) && i < len(cols); i++ {
			x, err := strconv.ParseUint(cols[i], 10, 64)
			if err != nil {
				return CPUTimes{}, fmt.Errorf("%w /proc/stat: cpu column %d: %w", ErrParse, i+1, err)
			}
			v[i] = x
		}
		return CPUTimes{User: v[0], Nice: v[1], System: v[2], Idle: v[3], IOWait: v[4], IRQ: v[5], SoftIRQ: v[6], Steal: v[7]}, nil
	}
	if err := sc.Err(); err != nil {
		return CPUTimes{}, fmt.Errorf("%w /proc/stat: %w", ErrParse, err)
	}
	return CPUTimes{}, fmt.Errorf("%w /proc/stat: no aggregate cpu line", ErrParse)
}

// CPUBusy returns the fraction in [0, 1] of CPU time that was not idle
// between two readings. Idle time is Idle plus IOWait; Steal counts as busy
// (the CPU was not available to this host). A counter that went backwards
// (IOWait does on tickless kernels) contributes nothing. If no time elapsed
// between the readings, CPUBusy returns 0.
func CPUBusy(prev, cur CPUTimes) float64 {
	d := func(a, b uint64) uint64 {
		if b < a {
			return 0
		}
		return b - a
	}
	idle := d(prev.Idle, cur.Idle) + d(prev.IOWait, cur.IOWait)
	busy := d(prev.User, cur.User) + d(prev.Nice, cur.Nice) + d(prev.System, cur.System) +
		d(prev.IRQ, cur.IRQ) + d(prev.SoftIRQ, cur.SoftIRQ) + d(prev.Steal, cur.Steal)
	total := idle + busy
	if total == 0 {
		return 0
	}
	return float64(busy) / float64(total)
}
