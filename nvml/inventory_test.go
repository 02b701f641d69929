package nvml

import (
	"errors"
	"fmt"
	"testing"
)

// Inspect over the Fake: a V100 and a P100, models from the names, one
// failing device reported in place; a Telemetry without DriverVersion has
// no driver.
func TestInspect_FakeMix(t *testing.T) {
	f := NewFake(
		Sample{Name: "Tesla V100-SXM2-32GB", MemoryTotalBytes: 32 << 30},
		Sample{Name: "Tesla P100-PCIE-16GB", MemoryTotalBytes: 16 << 30},
		Sample{Name: "Tesla P100-PCIE-16GB"},
	)
	f.SetErr(2, ErrGPULost)
	inv := Inspect(f)
	if inv.Compiled != Compiled || inv.Driver != "" || inv.Reason != "" || len(inv.Devices) != 3 {
		t.Fatalf("inventory %+v", inv)
	}
	if d := inv.Devices[0]; d.Model != "V100" || d.MemoryTotalBytes != 32<<30 {
		t.Errorf("device 0: %+v", d)
	}
	if d := inv.Devices[1]; d.Model != "P100" || d.MemoryTotalBytes != 16<<30 {
		t.Errorf("device 1: %+v", d)
	}
	if d := inv.Devices[2]; d.Err == "" || d.Name != "" {
		t.Errorf("device 2 (lost): %+v", d)
	}
}

// No device and a closed Telemetry each say why there are no GPUs.
func TestInspect_NoDevicesSaysWhy(t *testing.T) {
	if inv := Inspect(NewFake()); inv.Reason != "NVML reports no GPU" || len(inv.Devices) != 0 || inv.Devices == nil {
		t.Fatalf("no devices: %+v", inv)
	}
	f := NewFake(Sample{Name: "Tesla V100-SXM2-32GB"})
	f.Close()
	if inv := Inspect(f); inv.Reason != ErrClosed.Error() {
		t.Fatalf("closed: %+v", inv)
	}
}

func TestReason(t *testing.T) {
	initErr := &OpError{Op: "Init", Device: -1, Code: 12, Text: "no NVIDIA driver (libnvidia-ml.so.1 not found)", kind: ErrNoNVML}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{initErr, "no NVIDIA driver (libnvidia-ml.so.1 not found)"},
		{fmt.Errorf("nvml: sample all: %w", initErr), "no NVIDIA driver (libnvidia-ml.so.1 not found)"},
		{errors.New("other"), "other"},
	} {
		if got := Reason(tc.err); got != tc.want {
			t.Errorf("Reason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
