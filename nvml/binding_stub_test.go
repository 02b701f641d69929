//go:build !cgo || ringtail_nonvml

package nvml

import (
	"errors"
	"testing"
)

func TestOpen_WithoutBindingEveryCallIsErrNoNVML(t *testing.T) {
	if Compiled {
		t.Fatal("stub build claims to contain the binding")
	}
	tel, err := Open(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tel.DeviceCount(); !errors.Is(err, ErrNoNVML) {
		t.Fatalf("DeviceCount: err = %v, want ErrNoNVML", err)
	}
	if _, err := tel.Device(0); !errors.Is(err, ErrNoNVML) {
		t.Fatalf("Device: err = %v, want ErrNoNVML", err)
	}
	if _, err := SampleAll(tel); !errors.Is(err, ErrNoNVML) {
		t.Fatalf("SampleAll: err = %v, want ErrNoNVML", err)
	}
	if err := tel.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tel.DeviceCount(); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: err = %v, want ErrClosed", err)
	}
}

// Inspect in a build without the binding says so.
func TestInspect_WithoutBinding(t *testing.T) {
	tel, err := Open(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Close()
	inv := Inspect(tel)
	if inv.Compiled || len(inv.Devices) != 0 || inv.Reason != notCompiled {
		t.Fatalf("inventory %+v", inv)
	}
	if want := "NVML not compiled in (built with CGO_ENABLED=0 or -tags ringtail_nonvml)"; inv.Reason != want {
		t.Fatalf("reason %q, want %q", inv.Reason, want)
	}
}
