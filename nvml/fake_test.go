package nvml

import (
	"errors"
	"testing"
)

func TestFake_SampleAllSkipsFailingDeviceAndReportsIt(t *testing.T) {
	f := NewFake(
		Sample{Name: "NVIDIA H100 80GB HBM3", Model: "H100", MemoryTotalBytes: 80 << 30},
		Sample{Name: "NVIDIA H100 80GB HBM3", Model: "H100", MemoryTotalBytes: 80 << 30},
		Sample{Name: "NVIDIA H100 80GB HBM3", Model: "H100", MemoryTotalBytes: 80 << 30},
	)
	f.SetErr(1, ErrGPULost)
	got, err := SampleAll(f)
	if !errors.Is(err, ErrGPULost) {
		t.Fatalf("err = %v, want ErrGPULost", err)
	}
	if len(got) != 2 || got[0].Index != 0 || got[1].Index != 2 {
		t.Fatalf("got %+v, want devices 0 and 2", got)
	}

	f.SetErr(1, nil)
	f.Set(1, Sample{Name: "x", SMClockMHz: 1980})
	d, err := f.Device(1)
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.Sample()
	if err != nil || s.SMClockMHz != 1980 || s.Index != 1 {
		t.Fatalf("after Set: %+v, %v", s, err)
	}
	if _, err := f.Device(3); !errors.Is(err, ErrNoDevice) {
		t.Fatalf("Device(3): err = %v, want ErrNoDevice", err)
	}

	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Sample(); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: err = %v, want ErrClosed", err)
	}
	if _, err := SampleAll(f); !errors.Is(err, ErrClosed) {
		t.Fatalf("SampleAll after Close: err = %v, want ErrClosed", err)
	}
}

func TestFields_String(t *testing.T) {
	var s Fields
	if s.String() != "none" {
		t.Fatalf("empty set = %q", s)
	}
	s = s.With(FieldPower).With(FieldUUID)
	if got := s.String(); got != "uuid|power" {
		t.Fatalf("got %q", got)
	}
	if !s.Has(FieldPower) || s.Has(FieldMemory) {
		t.Fatalf("Has wrong for %v", s)
	}
}

func TestConfig_Validate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (Config{LibraryPath: "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"}).Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Config{LibraryPath: "libnvidia-ml.so.1"}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("relative path: err = %v, want ErrInvalidConfig", err)
	}
}
