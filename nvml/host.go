package nvml

import (
	"fmt"
	"io/fs"
	"os"
	"time"
)

// HostConfig configures a HostReader.
type HostConfig struct {
	// Now is the clock readings are stamped and differenced with.
	Now func() time.Time
	// Proc is the /proc file system; "stat" and "net/dev" are read from it.
	Proc fs.FS
	// Interfaces are the network interfaces to count; empty means every
	// interface except the loopback "lo". List the training NIC(s) to keep
	// bridge and veth traffic from being counted twice.
	Interfaces []string
}

// DefaultHostConfig reads the real /proc with the wall clock.
func DefaultHostConfig() HostConfig {
	return HostConfig{Now: time.Now, Proc: os.DirFS("/proc")}
}

// Validate reports whether c is usable.
func (c HostConfig) Validate() error {
	if c.Now == nil {
		return fmt.Errorf("%w: HostConfig.Now is nil", ErrInvalidConfig)
	}
	if c.Proc == nil {
		return fmt.Errorf("%w: HostConfig.Proc is nil", ErrInvalidConfig)
	}
	for _, name := range c.Interfaces {
		if name == "" {
			return fmt.Errorf("%w: empty interface name", ErrInvalidConfig)
		}
	}
	return nil
}

// HostSample is host CPU and network activity over one interval. It is
// plain data.
type HostSample struct {
	// At is when the interval ended.
	At time.Time
	// Interval is the length of the interval.
	Interval time.Duration
	// CPUBusy is the fraction in [0, 1] of all CPUs' time spent not idle.
	CPUBusy float64
	// NetRxBytesPerSec is the receive rate summed over counted interfaces.
	NetRxBytesPerSec float64
	// NetTxBytesPerSec is the transmit rate summed over counted interfaces.
	NetTxBytesPerSec float64
}

// HostReader is the no-GPU telemetry fallback: it turns successive
// readings of /proc/stat and /proc/net/dev into HostSamples. It is not safe
// for concurrent use; one owner (the driver loop) calls Read.
type HostReader struct {
	cfg HostConfig

	havePrev bool
	prevAt   time.Time
	prevCPU  CPUTimes
	prevNet  []NetCounters
}

// NewHostReader returns a HostReader, or an error if cfg is invalid. It
// reads nothing until the first Read.
func NewHostReader(cfg HostConfig) (*HostReader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("nvml: host reader: %w", err)
	}
	return &HostReader{cfg: cfg}, nil
}

// Read takes a reading and returns the activity since the previous one. The
// first call, and any call at which the clock has not advanced, only
// records a baseline and returns ErrNoBaseline.
func (r *HostReader) Read() (HostSample, error) {
	statText, err := fs.ReadFile(r.cfg.Proc, "stat")
	if err != nil {
		return HostSample{}, fmt.Errorf("nvml: host reader: %w", err)
	}
	devText, err := fs.ReadFile(r.cfg.Proc, "net/dev")
	if err != nil {
		return HostSample{}, fmt.Errorf("nvml: host reader: %w", err)
	}
	at := r.cfg.Now()
	cpu, err := ParseProcStat(statText)
	if err != nil {
		return HostSample{}, fmt.Errorf("nvml: host reader: %w", err)
	}
	net, err := ParseNetDev(devText)
	if err != nil {
		return HostSample{}, fmt.Errorf("nvml: host reader: %w", err)
	}

	prevAt, prevCPU, prevNet, had := r.prevAt, r.prevCPU, r.prevNet, r.havePrev
	r.havePrev, r.prevAt, r.prevCPU, r.prevNet = true, at, cpu, net

	dt := at.Sub(prevAt)
	if !had || dt <= 0 {
		return HostSample{}, ErrNoBaseline
	}
	rx, tx := NetRates(prevNet, net, dt, r.cfg.Interfaces)
	return HostSample{
		At:               at,
		Interval:         dt,
		CPUBusy:          CPUBusy(prevCPU, cpu),
		NetRxBytesPerSec: rx,
		NetTxBytesPerSec: tx,
	}, nil
}
