package nvml

import (
	"errors"
	"fmt"
)

// Telemetry is the source of GPU readings for one process. Implementations:
// the NVML binding (Open), and Fake for tests. All methods are safe for
// concurrent use.
type Telemetry interface {
	// DeviceCount returns the number of GPUs visible to this process.
	DeviceCount() (int, error)
	// Device returns the GPU with the given index in [0, DeviceCount()).
	Device(index int) (Device, error)
	// Close releases the telemetry source. Calls after Close fail with
	// ErrClosed; closing twice is not an error.
	Close() error
}

// Device is one GPU. Its methods fail with ErrClosed after the Telemetry
// that returned it is closed.
type Device interface {
	// Index returns the device's index.
	Index() int
	// Name returns the marketing name, e.g. "Tesla V100-SXM2-16GB".
	Name() (string, error)
	// Sample reads the device's current state.
	Sample() (Sample, error)
}

// SampleAll reads every device of t in index order. Devices that fail are
// left out of the result and their errors are joined into the returned
// error, so one lost GPU does not hide the others. If the device count
// cannot be read, SampleAll returns no samples and that error.
func SampleAll(t Telemetry) ([]Sample, error) {
	n, err := t.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("nvml: sample all: %w", err)
	}
	samples := make([]Sample, 0, n)
	var errs []error
	for i := 0; i < n; i++ {
		d, err := t.Device(i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s, err := d.Sample()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		samples = append(samples, s)
	}
	return samples, errors.Join(errs...)
}
