package nvml

import (
	"fmt"
	"path/filepath"
)

// Config configures Open.
type Config struct {
	// LibraryPath is the NVML shared library to load. Empty means go-nvml's
	// default, "libnvidia-ml.so.1", found through the dynamic loader's
	// search path. A non-empty path must be absolute.
	LibraryPath string
}

// Validate reports whether c is usable.
func (c Config) Validate() error {
	if c.LibraryPath != "" && !filepath.IsAbs(c.LibraryPath) {
		return fmt.Errorf("%w: LibraryPath %q is not absolute", ErrInvalidConfig, c.LibraryPath)
	}
	return nil
}
