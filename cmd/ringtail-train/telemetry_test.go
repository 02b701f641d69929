package main

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/nvml"
)

// startTestTelemetry starts the sampler of a rank with this local rank on
// a tick channel the test drives; it returns the ticks, every reading in
// order, and the GPU index sampled. The sampler stops with the test.
func startTestTelemetry(t *testing.T, localRank int) (chan<- time.Time, <-chan nvml.Reading, int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ticks := make(chan time.Time)
	readings := make(chan nvml.Reading, 16)
	dev, gpu, s, err := startTelemetry(ctx, localRank, nil, nvml.SamplerConfig{Ticks: ticks, Log: zerolog.Nop(),
		OnReading: func(r nvml.Reading) { readings <- r }})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); <-s.Done(); dev.Close() })
	return ticks, readings, gpu
}

// A rank's sampler reads the host's /proc on every tick, with or without a
// GPU: its CPU figure feeds the predictor and --json's telemetry report.
// (ringtail-train once passed a zero HostConfig, which fails validation,
// so the host was never read and cpu_busy was always 0.)
func TestTheRankSamplerReadsTheHost(t *testing.T) {
	ticks, readings, gpu := startTestTelemetry(t, 0)
	if gpu != 0 {
		t.Errorf("local rank 0 samples GPU %d, want 0", gpu)
	}
	first := <-readings // taken at once: the host's baseline
	if first.HostOK {
		t.Errorf("first reading has a host interval before any baseline: %+v", first)
	}
	ticks <- time.Now()
	r := <-readings
	if !r.HostOK || r.HostErr != "" {
		t.Fatalf("second reading: HostOK %v, HostErr %q; want the host's CPU and network over the interval", r.HostOK, r.HostErr)
	}
	if r.Host.CPUBusy < 0 || r.Host.CPUBusy > 1 {
		t.Errorf("CPU busy %v, want a fraction in [0, 1]", r.Host.CPUBusy)
	}
}

// Ranks share a host's GPUs round-robin: on a build or machine without
// NVML the index stays the local rank (nothing to wrap by), and the
// sampler falls back to the host.
func TestTheRankSamplerFallsBackToTheHost(t *testing.T) {
	if tel, err := nvml.Open(nvml.Config{}); err == nil {
		_, noGPU := tel.DeviceCount()
		tel.Close()
		if noGPU == nil {
			t.Skip("this machine has NVML: no fallback to see")
		}
	}
	_, readings, gpu := startTestTelemetry(t, 3)
	if gpu != 3 {
		t.Errorf("local rank 3 without NVML samples GPU %d, want 3", gpu)
	}
	if r := <-readings; r.Source != nvml.SourceHost {
		t.Errorf("source %v without NVML, want host", r.Source)
	}
}
