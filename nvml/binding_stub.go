//go:build !(cgo && ringtail_nvml)

package nvml

import (
	"fmt"
	"sync"
)

// BuildTag is the build constraint under which the real NVML binding is
// compiled: go build -tags ringtail_nvml, with cgo enabled. This build has
// no binding.
const BuildTag = "ringtail_nvml"

// Compiled reports whether this build contains the real NVML binding.
const Compiled = false

// Open validates cfg and returns a Telemetry whose every call fails with an
// error wrapping ErrNoNVML: this binary was built without cgo or without
// the ringtail_nvml tag. The behaviour matches a real build on a machine
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
	return fmt.Errorf("%w: built without cgo && %s", ErrNoNVML, BuildTag)
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
