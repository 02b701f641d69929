package nvml

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Source says where a Reading's device data comes from.
type Source uint8

// The telemetry sources of a Sampler.
const (
	// SourceNone: no reading has been taken yet.
	SourceNone Source = iota
	// SourceNVML: the rank's GPU, through NVML.
	SourceNVML
	// SourceHost: no usable GPU; only the /proc host fallback.
	SourceHost
)

// String returns "none", "nvml" or "host".
func (s Source) String() string {
	switch s {
	case SourceNVML:
		return "nvml"
	case SourceHost:
		return "host"
	}
	return "none"
}

// SamplerConfig configures StartSampler.
type SamplerConfig struct {
	// Telemetry is the GPU source: Open's result, or a Fake. nil means
	// the rank has no GPU and the Sampler runs on Host alone.
	Telemetry Telemetry
	// Device is the index of this rank's GPU in Telemetry (≥ 0).
	Device int
	// Host is the /proc fallback, read on every tick whether or not a GPU
	// is sampled (host CPU and network rates feed the straggler model
	// either way). nil disables it. The Sampler's goroutine becomes its
	// only user.
	Host *HostReader
	// Interval is the time between samples when Ticks is nil (> 0).
	Interval time.Duration
	// Ticks, when non-nil, replaces the wall-clock ticker: the Sampler
	// takes one sample per value received and stops if it is closed.
	// Tests drive the Sampler with it.
	Ticks <-chan time.Time
	// Now stamps readings and times the NVLink rates; nil means time.Now.
	Now func() time.Time
	// OnReading, when set, is called on the Sampler's goroutine after
	// each reading is published. It must not block (send to the driver
	// loop with a select/default, for example).
	OnReading func(Reading)
	// Log receives the one line saying which source is used, and a line
	// whenever a source's error changes (not on every tick).
	Log zerolog.Logger
}

// Validate reports whether c is usable.
func (c SamplerConfig) Validate() error {
	switch {
	case c.Telemetry == nil && c.Host == nil:
		return fmt.Errorf("%w: sampler has neither Telemetry nor Host", ErrInvalidConfig)
	case c.Device < 0:
		return fmt.Errorf("%w: sampler device %d", ErrInvalidConfig, c.Device)
	case c.Ticks == nil && c.Interval <= 0:
		return fmt.Errorf("%w: sampler interval %v, want > 0", ErrInvalidConfig, c.Interval)
	}
	return nil
}

// Reading is the latest telemetry of one rank. It is plain data; errors
// are kept as text so that it can be copied and serialised.
type Reading struct {
	// Seq counts readings from 1; 0 means no reading yet.
	Seq uint64
	// At is when the reading was taken (SamplerConfig.Now).
	At time.Time
	// Source is where device data comes from. It starts as SourceNVML
	// when a Telemetry is given and becomes SourceHost for good once NVML
	// proves unusable (ErrNoNVML, or no such device).
	Source Source

	// GPU is the most recent successful sample of the rank's device (the
	// zero Sample until there is one). GPUAt is when it was taken.
	GPU   Sample
	GPUAt time.Time
	// GPUErr is the failure of this reading's GPU sample, "" when it
	// succeeded (GPU is then fresh) or when there is no GPU.
	GPUErr string
	// GPULost is set, for good, when NVML reported the device fallen off
	// the bus: the rank should be treated as failed, not slow. The
	// Sampler stops calling NVML for it.
	GPULost bool
	// NVLinkRxBytesPerSec and NVLinkTxBytesPerSec are the NVLink data
	// rates between the last two successful GPU samples (0 before there
	// are two, or without NVLink).
	NVLinkRxBytesPerSec float64
	NVLinkTxBytesPerSec float64

	// Host is the most recent host interval (CPU busy fraction, network
	// rates); HostOK says whether there is one.
	Host   HostSample
	HostOK bool
	// HostErr is the failure of this reading's host read ("" on success
	// and on the first read, which only takes a baseline).
	HostErr string
}

// Sampler samples one rank's device (or the host) on a background ticker
// and hands out the latest Reading without blocking. It is the one part of
// this package that starts a goroutine; the goroutine ends when the
// context given to StartSampler ends (see Done).
type Sampler struct {
	cfg    SamplerConfig
	latest atomic.Pointer[Reading]
	done   chan struct{}

	// Owned by the sampling goroutine.
	cur       Reading
	dev       Device
	announced bool
	gpuErr    string
	hostErr   string
	// noGPU is why device data comes from the host (Reason of the error
	// that ended GPU sampling; "" while the GPU is sampled).
	noGPU string
}

// StartSampler validates cfg, takes a first reading at once and then one
// per tick until ctx ends. NVML is never called again once it has failed
// to initialise or the device is lost.
func StartSampler(ctx context.Context, cfg SamplerConfig) (*Sampler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("nvml: sampler: %w", err)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Sampler{cfg: cfg, done: make(chan struct{})}
	s.cur.Source = SourceHost
	if cfg.Telemetry != nil {
		s.cur.Source = SourceNVML
	}
	ticks, stop := cfg.Ticks, func() {}
	if ticks == nil {
		t := time.NewTicker(cfg.Interval)
		ticks, stop = t.C, t.Stop
	}
	go s.run(ctx, ticks, stop)
	return s, nil
}

// Latest returns the most recent reading (Seq 0 before the first). It never
// blocks and is safe for concurrent use.
func (s *Sampler) Latest() Reading {
	if r := s.latest.Load(); r != nil {
		return *r
	}
	return Reading{}
}

// Done is closed when the sampling goroutine has returned, after the
// context ended (or the Ticks channel was closed).
func (s *Sampler) Done() <-chan struct{} { return s.done }

func (s *Sampler) run(ctx context.Context, ticks <-chan time.Time, stop func()) {
	defer close(s.done)
	defer stop()
	if ctx.Err() != nil {
		return
	}
	s.sample()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-ticks:
			if !ok {
				return
			}
			s.sample()
		}
	}
}

// sample takes one reading and publishes it.
func (s *Sampler) sample() {
	now := s.cfg.Now()
	s.cur.Seq++
	s.cur.At = now
	if s.cur.Source == SourceNVML && !s.cur.GPULost {
		s.sampleGPU(now)
	}
	if s.cfg.Host != nil {
		s.sampleHost()
	}
	if !s.announced {
		s.announce()
	}
	r := s.cur
	s.latest.Store(&r)
	if s.cfg.OnReading != nil {
		s.cfg.OnReading(r)
	}
}

// sampleGPU reads the device into s.cur, falling back to the host source
// for good when NVML is unusable.
func (s *Sampler) sampleGPU(now time.Time) {
	var err error
	if s.dev == nil {
		s.dev, err = s.cfg.Telemetry.Device(s.cfg.Device)
	}
	var smp Sample
	if err == nil {
		smp, err = s.dev.Sample()
	}
	switch {
	case err == nil:
		s.nvlinkRates(smp, now)
		s.cur.GPU, s.cur.GPUAt, s.cur.GPUErr = smp, now, ""
		s.gpuErr = ""
		return
	case errors.Is(err, ErrNoNVML) || errors.Is(err, ErrNoDevice):
		// Never call NVML again: go-nvml can crash after a failed Init.
		s.cur.Source, s.cur.GPUErr, s.dev = SourceHost, err.Error(), nil
		s.noGPU = Reason(err)
		if s.announced {
			s.cfg.Log.Warn().Err(err).Msg("nvml: GPU telemetry unusable, now on the /proc host fallback")
		}
		return
	case errors.Is(err, ErrGPULost):
		s.cur.GPULost, s.cur.GPUErr, s.dev = true, err.Error(), nil
		s.cfg.Log.Error().Err(err).Int("device", s.cfg.Device).Msg("nvml: GPU lost; no longer sampled")
		return
	}
	s.cur.GPUErr = err.Error()
	if s.cur.GPUErr != s.gpuErr {
		s.gpuErr = s.cur.GPUErr
		s.cfg.Log.Warn().Err(err).Int("device", s.cfg.Device).Msg("nvml: GPU sample failed; keeping the last good one")
	}
}

// nvlinkRates sets the NVLink rates from the previous successful sample to
// smp. A counter that went backwards (driver reload) gives 0.
func (s *Sampler) nvlinkRates(smp Sample, now time.Time) {
	prev, prevAt := s.cur.GPU, s.cur.GPUAt
	dt := now.Sub(prevAt).Seconds()
	if prevAt.IsZero() || dt <= 0 || smp.Unsupported.Has(FieldNVLink) || prev.Unsupported.Has(FieldNVLink) {
		s.cur.NVLinkRxBytesPerSec, s.cur.NVLinkTxBytesPerSec = 0, 0
		return
	}
	rate := func(a, b uint64) float64 {
		if b < a {
			return 0
		}
		return float64(b-a) * 1024 / dt
	}
	s.cur.NVLinkRxBytesPerSec = rate(prev.NVLinkRxKiB, smp.NVLinkRxKiB)
	s.cur.NVLinkTxBytesPerSec = rate(prev.NVLinkTxKiB, smp.NVLinkTxKiB)
}

// sampleHost reads the host interval into s.cur.
func (s *Sampler) sampleHost() {
	h, err := s.cfg.Host.Read()
	switch {
	case err == nil:
		s.cur.Host, s.cur.HostOK, s.cur.HostErr = h, true, ""
		s.hostErr = ""
		return
	case errors.Is(err, ErrNoBaseline):
		s.cur.HostErr = ""
		return
	}
	s.cur.HostErr = err.Error()
	if s.cur.HostErr != s.hostErr {
		s.hostErr = s.cur.HostErr
		s.cfg.Log.Warn().Err(err).Msg("nvml: host telemetry read failed")
	}
}

// announce logs, once, which source the Sampler uses.
func (s *Sampler) announce() {
	s.announced = true
	if s.cur.Source == SourceNVML {
		prior, known := PriorThroughput(s.cur.GPU.Model)
		ev := s.cfg.Log.Info().Str("source", "nvml").Int("device", s.cfg.Device)
		if s.cur.GPUErr == "" {
			ev = ev.Str("name", s.cur.GPU.Name).Str("model", s.cur.GPU.Model).Bool("prior_known", known).Float64("prior", prior)
		} else {
			ev = ev.Str("first_sample_error", s.cur.GPUErr)
		}
		ev.Msg("nvml: telemetry from the GPU")
		return
	}
	reason := "no GPU telemetry configured"
	if s.noGPU != "" {
		reason = s.noGPU
	}
	fallback := "host CPU and network from /proc"
	if s.cfg.Host == nil {
		fallback = "no host fallback"
	}
	ev := s.cfg.Log.Info().Str("source", "host").Str("reason", reason).Bool("host_reader", s.cfg.Host != nil)
	if s.cur.GPUErr != "" {
		ev = ev.Str("error", s.cur.GPUErr)
	}
	ev.Msg("nvml: " + reason + ": running without GPU telemetry (" + fallback + ")")
}
