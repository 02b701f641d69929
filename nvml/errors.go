package nvml

import (
	"errors"
	"fmt"
)

// ErrNoNVML is wrapped by every error that means NVML cannot be used in this
// process: the binary was built without cgo or with the ringtail_nonvml
// tag, the library could not be loaded, or NVML's initialisation failed. Once an
// initialisation has failed, every later call on the same Telemetry returns
// an error wrapping ErrNoNVML without touching NVML. Callers branch on it
// with errors.Is and fall back to HostReader.
var ErrNoNVML = errors.New("nvml: NVML unavailable")

// ErrClosed is wrapped by errors from calls made after Close.
var ErrClosed = errors.New("nvml: telemetry closed")

// ErrGPULost is wrapped by errors for a device that NVML reports as fallen
// off the bus (NVML_ERROR_GPU_IS_LOST). The rank owning it should be treated
// as failed, not as slow.
var ErrGPULost = errors.New("nvml: GPU is lost")

// ErrNoDevice is wrapped by errors for a device index outside
// [0, DeviceCount()).
var ErrNoDevice = errors.New("nvml: no such device")

// ErrNoBaseline is returned by HostReader.Read when there is no earlier
// reading to take differences against: on the first call, and when the
// injected clock did not move forward. The reading is kept as the new
// baseline, so the next call succeeds.
var ErrNoBaseline = errors.New("nvml: no baseline reading yet")

// ErrInvalidConfig is wrapped by every error a Validate method returns.
var ErrInvalidConfig = errors.New("nvml: invalid config")

// ErrParse is wrapped by every error a /proc parser returns.
var ErrParse = errors.New("nvml: cannot parse")

// OpError reports a failed NVML call. errors.Is(err, ErrNoNVML) holds for a
// failed initialisation and errors.Is(err, ErrGPULost) for a lost device.
type OpError struct {
	// Op is the NVML entry point that failed, e.g. "DeviceGetMemoryInfo".
	Op string
	// Device is the device index, or -1 for library-level calls.
	Device int
	// Code is NVML's nvmlReturn_t value.
	Code int
	// Text is NVML's description of Code.
	Text string

	kind error
}

// Error implements error.
func (e *OpError) Error() string {
	if e.Device < 0 {
		return fmt.Sprintf("nvml: %s: %s (code %d)", e.Op, e.Text, e.Code)
	}
	return fmt.Sprintf("nvml: %s on device %d: %s (code %d)", e.Op, e.Device, e.Text, e.Code)
}

// Unwrap returns ErrNoNVML, ErrGPULost or nil, so that errors.Is can
// classify the failure.
func (e *OpError) Unwrap() error { return e.kind }

// reason implements reasoned: a failed Init's description ("no NVIDIA
// driver (libnvidia-ml.so.1 not found)"); other calls give the whole error.
func (e *OpError) reason() string {
	if e.Op == "Init" {
		return e.Text
	}
	return e.Error()
}

// reasoned is an error that can say in a few words why NVML is unusable.
type reasoned interface{ reason() string }

// Reason says in a few words why err keeps this process from GPU
// telemetry, for a log line or `ringtail info`: "no NVIDIA driver
// (libnvidia-ml.so.1 not found)", "NVML not compiled in (...)". Errors of
// other origins give their whole text; nil gives "".
func Reason(err error) string {
	if err == nil {
		return ""
	}
	var r reasoned
	if errors.As(err, &r) {
		return r.reason()
	}
	return err.Error()
}
