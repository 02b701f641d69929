package nvml

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// NetCounters is one interface's line of /proc/net/dev: cumulative counts
// since the interface came up.
type NetCounters struct {
	// Name is the interface name, e.g. "eth0".
	Name string
	// RxBytes is the number of bytes received.
	RxBytes uint64
	// RxPackets is the number of packets received.
	RxPackets uint64
	// TxBytes is the number of bytes transmitted.
	TxBytes uint64
	// TxPackets is the number of packets transmitted.
	TxPackets uint64
}

// ParseNetDev parses the text of /proc/net/dev. The result is sorted by
// interface name. Lines without a colon (the two header lines) are skipped;
// an interface line with fewer than 16 counters is an error.
func ParseNetDev(text []byte) ([]NetCounters, error) {
	var out []NetCounters
	sc := bufio.NewScanner(bytes.NewReader(text))
	for line := 1; sc.Scan(); line++ {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		name = strings.TrimSpace(name)
		cols := strings.Fields(rest)
		if name == "" || len(cols) < 16 {
			return nil, fmt.Errorf("%w /proc/net/dev line %d: want an interface name and 16 counters", ErrParse, line)
		}
		var v [16]uint64
		for i := range v {
			x, err := strconv.ParseUint(cols[i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%w /proc/net/dev line %d column %d: %w", ErrParse, line, i+1, err)
			}
			v[i] = x
		}
		out = append(out, NetCounters{Name: name, RxBytes: v[0], RxPackets: v[1], TxBytes: v[8], TxPackets: v[9]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w /proc/net/dev: %w", ErrParse, err)
	}
	slices.SortFunc(out, func(a, b NetCounters) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// NetRates returns the received and transmitted bytes per second summed
// over the interfaces present in both readings, over an interval dt.
//
// If only is empty, every interface except the loopback "lo" counts;
// otherwise exactly the named ones do. An interface whose counter went
// backwards (it was re-created, or a 32-bit counter wrapped) contributes
// nothing for that direction. A non-positive dt gives zero rates.
func NetRates(prev, cur []NetCounters, dt time.Duration, only []string) (rxBytesPerSec, txBytesPerSec float64) {
	if dt <= 0 {
		return 0, 0
	}
	counts := func(name string) bool {
		if len(only) == 0 {
			return name != "lo"
		}
		return slices.Contains(only, name)
	}
	var rx, tx uint64
	for _, c := range cur {
		if !counts(c.Name) {
			continue
		}
		i := slices.IndexFunc(prev, func(p NetCounters) bool { return p.Name == c.Name })
		if i < 0 {
			continue
		}
		p := prev[i]
		if c.RxBytes >= p.RxBytes {
			rx += c.RxBytes - p.RxBytes
		}
		if c.TxBytes >= p.TxBytes {
			tx += c.TxBytes - p.TxBytes
		}
	}
	sec := dt.Seconds()
	return float64(rx) / sec, float64(tx) / sec
}
