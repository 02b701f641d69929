package nvml

import (
	"fmt"
	"sync"
)

// Fake is an in-memory Telemetry for tests of code that consumes GPU
// samples. Its devices report whatever was last Set; a device can be made
// to fail with SetErr. It is safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	samples []Sample
	errs    []error
	closed  bool
}

var _ Telemetry = (*Fake)(nil)

// NewFake returns a Fake with one device per sample; device i reports
// samples[i] with Index set to i.
func NewFake(samples ...Sample) *Fake {
	f := &Fake{samples: make([]Sample, len(samples)), errs: make([]error, len(samples))}
	for i, s := range samples {
		s.Index = i
		f.samples[i] = s
	}
	return f
}

// Set replaces what device index reports. It panics if index is out of
// range, which is a bug in the test.
func (f *Fake) Set(index int, s Sample) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s.Index = index
	f.samples[index] = s
}

// SetErr makes device index fail every call with err (nil clears it). It
// panics if index is out of range, which is a bug in the test.
func (f *Fake) SetErr(index int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs[index] = err
}

// DeviceCount implements Telemetry.
func (f *Fake) DeviceCount() (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, ErrClosed
	}
	return len(f.samples), nil
}

// Device implements Telemetry.
func (f *Fake) Device(index int) (Device, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, ErrClosed
	}
	if index < 0 || index >= len(f.samples) {
		return nil, fmt.Errorf("nvml: fake device %d of %d: %w", index, len(f.samples), ErrNoDevice)
	}
	return fakeDevice{f: f, index: index}, nil
}

// Close implements Telemetry.
func (f *Fake) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

// read returns device index's sample or error.
func (f *Fake) read(index int) (Sample, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return Sample{}, ErrClosed
	}
	if err := f.errs[index]; err != nil {
		return Sample{}, err
	}
	return f.samples[index], nil
}

// fakeDevice is one device of a Fake.
type fakeDevice struct {
	f     *Fake
	index int
}

// Index implements Device.
func (d fakeDevice) Index() int { return d.index }

// Name implements Device.
func (d fakeDevice) Name() (string, error) {
	s, err := d.f.read(d.index)
	return s.Name, err
}

// Sample implements Device.
func (d fakeDevice) Sample() (Sample, error) { return d.f.read(d.index) }
