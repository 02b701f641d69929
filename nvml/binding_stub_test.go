//go:build !(cgo && ringtail_nvml)

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
