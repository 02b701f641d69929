//go:build cgo && !ringtail_nonvml

package nvml

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringtail-ml/ringtail/internal/settings"
	"github.com/ringtail-ml/ringtail/internal/syncbuf"
)

// openReal opens the machine's real NVML, or skips the test with the
// reason when there is none (no library, no driver, no GPU). With
// RINGTAIL_NVML_REAL=1 a missing NVML is a failure instead, so a GPU host
// with a broken driver does not pass by skipping. Build and run on a GPU
// host with:
//
//	go test -c -tags ringtail_nvml -o nvml.test ./nvml
//	RINGTAIL_NVML_REAL=1 ./nvml.test -test.run Real -test.v
//
// RINGTAIL_NVML_LIBRARY may give an absolute path to libnvidia-ml.so.1.
func openReal(t *testing.T) Telemetry {
	t.Helper()
	tel, err := Open(Config{LibraryPath: os.Getenv("RINGTAIL_NVML_LIBRARY")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tel.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	n, err := tel.DeviceCount()
	if err == nil && n == 0 {
		err = errors.New("NVML reports no devices")
	}
	if err != nil {
		real, perr := settings.ParseBool("RINGTAIL_NVML_REAL", os.Getenv("RINGTAIL_NVML_REAL"), false)
		if perr != nil {
			t.Fatal(perr)
		}
		if real {
			t.Fatalf("RINGTAIL_NVML_REAL=1 but NVML is unusable: %v", err)
		}
		t.Skipf("no usable NVML/GPU on this machine (%v); RINGTAIL_NVML_REAL=1 makes this a failure", err)
	}
	return tel
}

// TestReal_NVMLReadingsAreSane reads every device of the real NVML.
func TestReal_NVMLReadingsAreSane(t *testing.T) {
	tel := openReal(t)
	n, err := tel.DeviceCount()
	if err != nil {
		t.Fatalf("DeviceCount: %v", err)
	}
	if n < 1 {
		t.Fatalf("DeviceCount = %d, want at least 1", n)
	}
	samples, err := SampleAll(tel)
	if err != nil {
		t.Fatalf("SampleAll: %v", err)
	}
	if len(samples) != n {
		t.Fatalf("%d samples for %d devices", len(samples), n)
	}
	for _, s := range samples {
		t.Logf("device %d: %+v (unsupported: %s)", s.Index, s, s.Unsupported)
		prior, known := PriorThroughput(s.Name)
		t.Logf("device %d: model %q prior %.2f known=%v", s.Index, s.Model, prior, known)
		if s.Name == "" {
			t.Errorf("device %d: empty name", s.Index)
		}
		if s.Unsupported.Has(FieldMemory) || s.MemoryTotalBytes == 0 {
			t.Errorf("device %d: memory total %d (unsupported: %s)", s.Index, s.MemoryTotalBytes, s.Unsupported)
		}
		if s.MemoryUsedBytes > s.MemoryTotalBytes || s.MemoryFreeBytes > s.MemoryTotalBytes {
			t.Errorf("device %d: used %d free %d exceed total %d", s.Index, s.MemoryUsedBytes, s.MemoryFreeBytes, s.MemoryTotalBytes)
		}
		if s.Unsupported.Has(FieldSMClock) || s.SMClockMHz == 0 || s.SMClockMHz > 5000 {
			t.Errorf("device %d: SM clock %d MHz", s.Index, s.SMClockMHz)
		}
		if s.GPUUtilPercent > 100 || s.MemoryUtilPercent > 100 {
			t.Errorf("device %d: utilisation %d%%/%d%%", s.Index, s.GPUUtilPercent, s.MemoryUtilPercent)
		}
		if !s.Unsupported.Has(FieldPower) && (s.PowerMilliwatts == 0 || s.PowerMilliwatts > 2_000_000) {
			t.Errorf("device %d: power %d mW", s.Index, s.PowerMilliwatts)
		}
	}
}

// TestReal_SamplerOnTheGPU runs the Sampler on device 0 for a few ticks
// (driven by the test, 200 ms apart by the wall clock) and logs what it
// read, NVLink rates included.
func TestReal_SamplerOnTheGPU(t *testing.T) {
	tel := openReal(t)
	ticks := make(chan time.Time)
	readings := make(chan Reading, 1)
	log := &syncbuf.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := StartSampler(ctx, SamplerConfig{
		Telemetry: tel, Ticks: ticks, Log: zerolog.New(log),
		OnReading: func(r Reading) { readings <- r },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); <-s.Done() }()
	r := <-readings
	for i := 0; i < 3; i++ {
		time.Sleep(200 * time.Millisecond) // let the counters move; not synchronisation
		ticks <- time.Now()
		r = <-readings
		t.Logf("reading %d: source %s err %q reasons %s nvlink rx %.0f B/s tx %.0f B/s sample %+v",
			r.Seq, r.Source, r.GPUErr, r.GPU.ClockReasons, r.NVLinkRxBytesPerSec, r.NVLinkTxBytesPerSec, r.GPU)
	}
	if r.Source != SourceNVML || r.GPUErr != "" || r.GPU.Name == "" || r.GPULost {
		t.Fatalf("reading %+v", r)
	}
	t.Logf("log: %s", log)
	if strings.Count(log.String(), "telemetry from the GPU") != 1 {
		t.Fatalf("source not announced exactly once:\n%s", log)
	}
}
