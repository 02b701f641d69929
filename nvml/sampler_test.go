package nvml

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/syncbuf"
)

// countingTelemetry wraps a Telemetry and counts every call that reaches
// it, so tests can prove the Sampler stopped calling.
type countingTelemetry struct {
	Telemetry
	calls atomic.Int64
}

func (c *countingTelemetry) DeviceCount() (int, error) {
	c.calls.Add(1)
	return c.Telemetry.DeviceCount()
}

func (c *countingTelemetry) Device(i int) (Device, error) {
	c.calls.Add(1)
	d, err := c.Telemetry.Device(i)
	if err != nil {
		return nil, err
	}
	return countingDevice{Device: d, calls: &c.calls}, nil
}

type countingDevice struct {
	Device
	calls *atomic.Int64
}

func (d countingDevice) Sample() (Sample, error) {
	d.calls.Add(1)
	return d.Device.Sample()
}

// failedInit is a Telemetry whose NVML failed to initialise.
type failedInit struct{}

func (failedInit) DeviceCount() (int, error) {
	return 0, fmt.Errorf("%w: Init: driver not loaded", ErrNoNVML)
}
func (failedInit) Device(int) (Device, error) {
	return nil, fmt.Errorf("%w: Init: driver not loaded", ErrNoNVML)
}
func (failedInit) Close() error { return nil }

// harness drives a Sampler tick by tick: every tick waits for the reading
// it produced, so the test and the sampler never race and nothing sleeps.
type harness struct {
	t        *testing.T
	s        *Sampler
	ticks    chan time.Time
	readings chan Reading
	clock    *manualClock
	log      *syncbuf.Buffer
	cancel   context.CancelFunc
}

// startHarness starts a Sampler on cfg with the harness's tick channel,
// clock (a new one at t=5000 s when clock is nil) and log.
func startHarness(t *testing.T, clock *manualClock, cfg SamplerConfig) *harness {
	t.Helper()
	if clock == nil {
		clock = &manualClock{now: time.Unix(5000, 0)}
	}
	h := &harness{
		t:        t,
		ticks:    make(chan time.Time),
		readings: make(chan Reading, 1),
		clock:    clock,
		log:      &syncbuf.Buffer{},
	}
	cfg.Ticks = h.ticks
	cfg.Now = h.clock.Now
	cfg.OnReading = func(r Reading) { h.readings <- r }
	cfg.Log = zerolog.New(h.log)
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	s, err := StartSampler(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	h.s = s
	t.Cleanup(func() {
		cancel()
		<-s.Done()
	})
	return h
}

// next waits for the reading the last tick (or the start) produced.
func (h *harness) next() Reading {
	h.t.Helper()
	r := <-h.readings
	if got := h.s.Latest(); got.Seq != r.Seq {
		h.t.Fatalf("Latest().Seq = %d after reading %d was published", got.Seq, r.Seq)
	}
	return r
}

// tick advances the clock by d, ticks, and returns the reading.
func (h *harness) tick(d time.Duration) Reading {
	h.t.Helper()
	h.clock.now = h.clock.now.Add(d)
	h.ticks <- h.clock.now
	return h.next()
}

func (h *harness) logLines(substr string) int { return strings.Count(h.log.String(), substr) }

func v100Sample() Sample {
	return Sample{
		Name: "Tesla V100-SXM2-16GB", Model: "V100", MemoryTotalBytes: 16 << 30, MemoryUsedBytes: 4 << 30,
		SMClockMHz: 1530, GPUUtilPercent: 90, ClockReasons: ClockSWPowerCap,
		NVLinkRxKiB: 1000, NVLinkTxKiB: 2000,
	}
}

func TestSampler_GPUReadingsOnEveryTickAndNVLinkRates(t *testing.T) {
	fake := NewFake(Sample{Name: "Tesla P100-PCIE-16GB"}, v100Sample())
	h := startHarness(t, nil, SamplerConfig{Telemetry: fake, Device: 1})

	r := h.next() // taken at start, before any tick
	if r.Seq != 1 || r.Source != SourceNVML || r.GPU.Model != "V100" || r.GPU.Index != 1 || r.GPUErr != "" {
		t.Fatalf("first reading %+v", r)
	}
	if !r.GPUAt.Equal(time.Unix(5000, 0)) || r.NVLinkRxBytesPerSec != 0 {
		t.Fatalf("first reading: at %v, nvlink rate %v before a second sample", r.GPUAt, r.NVLinkRxBytesPerSec)
	}
	if !r.GPU.ClockReasons.Slowing() {
		t.Fatalf("clock reasons %s lost", r.GPU.ClockReasons)
	}

	next := v100Sample()
	next.NVLinkRxKiB += 2048 // 2 MiB in 2 s
	next.NVLinkTxKiB += 4096
	next.SMClockMHz = 1200
	fake.Set(1, next)
	r = h.tick(2 * time.Second)
	if r.Seq != 2 || r.GPU.SMClockMHz != 1200 {
		t.Fatalf("second reading %+v", r)
	}
	if r.NVLinkRxBytesPerSec != 1<<20 || r.NVLinkTxBytesPerSec != 2<<20 {
		t.Fatalf("nvlink rates rx %v tx %v, want 1 MiB/s and 2 MiB/s", r.NVLinkRxBytesPerSec, r.NVLinkTxBytesPerSec)
	}

	next.NVLinkRxKiB = 0 // counters reset (driver reloaded): no negative rate
	next.NVLinkTxKiB += 4
	fake.Set(1, next)
	if r = h.tick(time.Second); r.NVLinkRxBytesPerSec != 0 || r.NVLinkTxBytesPerSec != 4096 {
		t.Fatalf("after reset: rx %v tx %v", r.NVLinkRxBytesPerSec, r.NVLinkTxBytesPerSec)
	}
	for i := 0; i < 3; i++ {
		h.tick(time.Second)
	}
	if n := h.logLines("telemetry from the GPU"); n != 1 {
		t.Fatalf("source announced %d times, want once:\n%s", n, h.log)
	}
	if !strings.Contains(h.log.String(), `"model":"V100"`) {
		t.Fatalf("announcement lacks the model:\n%s", h.log)
	}
}

func TestSampler_FailedInitFallsBackToHostAndNeverCallsNVMLAgain(t *testing.T) {
	tel := &countingTelemetry{Telemetry: failedInit{}}
	clock := &manualClock{now: time.Unix(5000, 0)}
	proc := fixtureFS(t, "proc_stat_t0.txt", "net_dev_t0.txt")
	host, err := NewHostReader(HostConfig{Now: clock.Now, Proc: proc, Interfaces: []string{"eth0"}})
	if err != nil {
		t.Fatal(err)
	}
	h := startHarness(t, clock, SamplerConfig{Telemetry: tel, Host: host})

	r := h.next()
	if r.Source != SourceHost || !strings.Contains(r.GPUErr, "driver not loaded") || r.HostOK {
		t.Fatalf("first reading %+v", r)
	}
	proc["stat"] = &fstest.MapFile{Data: readFixture(t, "proc_stat_t1.txt")}
	proc["net/dev"] = &fstest.MapFile{Data: readFixture(t, "net_dev_t1.txt")}
	r = h.tick(2 * time.Second)
	if !r.HostOK || r.Host.NetRxBytesPerSec != 125e6 || r.Host.Interval != 2*time.Second || r.Source != SourceHost {
		t.Fatalf("host reading %+v", r)
	}
	for i := 0; i < 4; i++ {
		h.tick(time.Second)
	}
	if n := tel.calls.Load(); n != 1 {
		t.Fatalf("%d calls reached the telemetry after its Init failed, want the 1 that failed", n)
	}
	if n := h.logLines("running without GPU telemetry"); n != 1 {
		t.Fatalf("fallback announced %d times, want once:\n%s", n, h.log)
	}
	if !strings.Contains(h.log.String(), "driver not loaded") {
		t.Fatalf("fallback reason not logged:\n%s", h.log)
	}
}

func TestSampler_NoTelemetryIsHostOnlyAndSaysSo(t *testing.T) {
	clock := &manualClock{now: time.Unix(5000, 0)}
	host, err := NewHostReader(HostConfig{Now: clock.Now, Proc: fixtureFS(t, "proc_stat_t0.txt", "net_dev_t0.txt")})
	if err != nil {
		t.Fatal(err)
	}
	h := startHarness(t, clock, SamplerConfig{Host: host})
	if r := h.next(); r.Source != SourceHost || r.GPUErr != "" {
		t.Fatalf("reading %+v", r)
	}
	if r := h.tick(time.Second); !r.HostOK || r.Host.CPUBusy != 0 {
		t.Fatalf("idle host reading %+v", r)
	}
	if !strings.Contains(h.log.String(), "no GPU telemetry configured") {
		t.Fatalf("log:\n%s", h.log)
	}
}

func TestSampler_NoSuchDeviceFallsBackToHost(t *testing.T) {
	tel := &countingTelemetry{Telemetry: NewFake(v100Sample())}
	h := startHarness(t, nil, SamplerConfig{Telemetry: tel, Device: 3})
	if r := h.next(); r.Source != SourceHost || !strings.Contains(r.GPUErr, "no such device") {
		t.Fatalf("reading %+v", r)
	}
	h.tick(time.Second)
	if n := tel.calls.Load(); n != 1 {
		t.Fatalf("%d telemetry calls, want 1", n)
	}
}

func TestSampler_TransientErrorKeepsLastGoodSampleAndLogsOnChange(t *testing.T) {
	fake := NewFake(v100Sample())
	h := startHarness(t, nil, SamplerConfig{Telemetry: fake})
	good := h.next()

	fake.SetErr(0, errors.New("nvml: DeviceGetClockInfo on device 0: Unknown Error (code 999)"))
	for i := 0; i < 3; i++ {
		r := h.tick(time.Second)
		if r.Source != SourceNVML || !strings.Contains(r.GPUErr, "Unknown Error") || r.GPU != good.GPU || !r.GPUAt.Equal(good.GPUAt) {
			t.Fatalf("failing tick %d: %+v", i, r)
		}
	}
	if n := h.logLines("GPU sample failed"); n != 1 {
		t.Fatalf("same error logged %d times, want once:\n%s", n, h.log)
	}
	fake.SetErr(0, nil)
	if r := h.tick(time.Second); r.GPUErr != "" || !r.GPUAt.Equal(r.At) {
		t.Fatalf("recovered reading %+v", r)
	}
	fake.SetErr(0, errors.New("again"))
	h.tick(time.Second)
	if n := h.logLines("GPU sample failed"); n != 2 {
		t.Fatalf("error after recovery logged %d times in all, want 2:\n%s", n, h.log)
	}
}

func TestSampler_LostGPUIsStickyAndNotCalledAgain(t *testing.T) {
	fake := NewFake(v100Sample())
	tel := &countingTelemetry{Telemetry: fake}
	h := startHarness(t, nil, SamplerConfig{Telemetry: tel})
	h.next()
	fake.SetErr(0, &OpError{Op: "DeviceGetMemoryInfo", Device: 0, Code: 15, Text: "GPU is lost", kind: ErrGPULost})
	r := h.tick(time.Second)
	if !r.GPULost || r.Source != SourceNVML {
		t.Fatalf("reading %+v", r)
	}
	calls := tel.calls.Load()
	fake.SetErr(0, nil)
	for i := 0; i < 3; i++ {
		if r = h.tick(time.Second); !r.GPULost {
			t.Fatal("GPULost cleared")
		}
	}
	if n := tel.calls.Load(); n != calls {
		t.Fatalf("%d calls to a lost GPU", n-calls)
	}
	if n := h.logLines("GPU lost"); n != 1 {
		t.Fatalf("loss logged %d times:\n%s", n, h.log)
	}
}

func TestSampler_StopsWhenTheContextEndsOrTicksClose(t *testing.T) {
	h := startHarness(t, nil, SamplerConfig{Telemetry: NewFake(v100Sample())})
	h.next()
	h.cancel()
	<-h.s.Done() // the test's deadline bounds this; no sleep
	if r := h.s.Latest(); r.Seq != 1 {
		t.Fatalf("Latest after stop: %+v", r)
	}

	ticks := make(chan time.Time)
	s, err := StartSampler(context.Background(), SamplerConfig{Telemetry: NewFake(v100Sample()), Ticks: ticks, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	close(ticks)
	<-s.Done()

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s, err = StartSampler(ctx, SamplerConfig{Telemetry: NewFake(v100Sample()), Interval: time.Hour, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	<-s.Done()
	if r := s.Latest(); r.Seq != 0 || r.Source != SourceNone {
		t.Fatalf("sampler started with a dead context took a reading: %+v", r)
	}
}

func TestSampler_LatestIsSafeFromOtherGoroutines(t *testing.T) {
	h := startHarness(t, nil, SamplerConfig{Telemetry: NewFake(v100Sample())})
	h.next()
	stop := make(chan struct{})
	backwards := make(chan bool)
	go func() {
		var last uint64
		for {
			select {
			case <-stop:
				backwards <- false
				return
			default:
				r := h.s.Latest()
				if r.Seq < last || r.Seq == 0 {
					backwards <- true
					return
				}
				last = r.Seq
			}
		}
	}()
	for i := 0; i < 50; i++ {
		h.tick(time.Millisecond)
	}
	close(stop)
	if <-backwards {
		t.Fatal("Latest went backwards or lost the reading")
	}
}

func TestSamplerConfig_Validate(t *testing.T) {
	for name, c := range map[string]SamplerConfig{
		"no source":       {Interval: time.Second},
		"negative device": {Telemetry: NewFake(), Device: -1, Interval: time.Second},
		"no interval":     {Telemetry: NewFake()},
	} {
		if _, err := StartSampler(context.Background(), c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig", name, err)
		}
	}
}

func TestSource_String(t *testing.T) {
	if SourceNone.String() != "none" || SourceNVML.String() != "nvml" || SourceHost.String() != "host" {
		t.Fatal("source names")
	}
}

func TestClockReasons_String(t *testing.T) {
	if got := (ClockIdle | ClockHWThermal | 1<<40).String(); got != "idle|hw_thermal|0x10000000000" {
		t.Fatalf("String = %q", got)
	}
	if ClockReasons(0).String() != "none" || ClockIdle.Slowing() || ClockApplicationsSetting.Slowing() || !ClockHWPowerBrake.Slowing() {
		t.Fatal("Slowing/none")
	}
}
