//go:build cgo && ringtail_nvml

package nvml

import (
	"os"
	"testing"
)

// TestReal_NVMLReadingsAreSane runs against the machine's real NVML. It is
// skipped unless RINGTAIL_NVML_REAL=1, so that it never runs where no GPU
// is expected. Build and run it on a GPU host with:
//
//	go test -c -tags ringtail_nvml -o nvml.test ./nvml
//	RINGTAIL_NVML_REAL=1 ./nvml.test -test.run Real -test.v
func TestReal_NVMLReadingsAreSane(t *testing.T) {
	if os.Getenv("RINGTAIL_NVML_REAL") != "1" {
		t.Skip("set RINGTAIL_NVML_REAL=1 on a GPU host to run against real NVML")
	}
	tel, err := Open(Config{LibraryPath: os.Getenv("RINGTAIL_NVML_LIBRARY")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tel.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
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
