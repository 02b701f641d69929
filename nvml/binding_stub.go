//go:build !cgo || ringtail_nonvml

package nvml

import (
	"fmt"
	"sync"
)

// BuildTag is the build tag that leaves the real NVML binding out: the
// binding is compiled whenever cgo is on (the default build), unless
// go build -tags ringtail_nonvml (or CGO_ENABLED=0) selects the stub, as
// this build did.
const BuildTag = "ringtail_nonvml"

// Compiled reports whether this build contains the real NVML binding.
const Compiled = false

// notCompiled is why a stub build has no GPU telemetry.
const notCompiled = "NVML not compiled in (built with CGO_ENABLED=0 or -tags " + BuildTag + ")"

// Open validates cfg and returns a Telemetry whose every call fails with an
// error wrapping ErrNoNVML: this binary was built without cgo or with the
// ringtail_nonvml tag. The behaviour matches a real build on a machine
// without a GPU, so callers have one fallback path.
func Open(cfg Config) (Telemetry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("nvml: open: %w", err)
	}
	return &unavailable{}, nil
}

// unavailable is the Telemetry of a build without NVML.
type unavailable struct {
	mu     sync.Mutex
	closed bool
}

func (u *unavailable) err() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return ErrClosed
	}
	return &unavailableError{why: notCompiled}
}

// DeviceCount implements Telemetry.
func (u *unavailable) DeviceCount() (int, error) { return 0, u.err() }

// Device implements Telemetry.
func (u *unavailable) Device(int) (Device, error) { return nil, u.err() }

// Close implements Telemetry.
func (u *unavailable) Close() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.closed = true
	return nil
}

// unavailableError is the ErrNoNVML of a build without the binding.
type unavailableError struct{ why string }

// Error implements error.
func (e *unavailableError) Error() string { return "nvml: NVML unavailable: " + e.why }

// Unwrap returns ErrNoNVML.
func (e *unavailableError) Unwrap() error { return ErrNoNVML }

// reason implements reasoned.
func (e *unavailableError) reason() string { return e.why }
