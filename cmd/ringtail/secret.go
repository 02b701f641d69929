package main

import (
	"fmt"
	"os"

	"github.com/ringtail-ml/ringtail/internal/launch"
)

// jobSecret resolves the job secret for `run` and `coordinator`: --secret-file
// first, then RINGTAIL_SECRET, then RINGTAIL_SECRET_FILE. It returns nil when
// none is given (run then generates one; coordinator refuses).
func jobSecret(secretFile string) ([]byte, error) {
	switch {
	case secretFile != "":
		s, err := launch.ReadSecretFile(secretFile)
		if err != nil {
			return nil, fmt.Errorf("--secret-file: %w", err)
		}
		return s, nil
	case os.Getenv(launch.EnvSecret) != "":
		return []byte(os.Getenv(launch.EnvSecret)), nil
	case os.Getenv(launch.EnvSecretFile) != "":
		s, err := launch.ReadSecretFile(os.Getenv(launch.EnvSecretFile))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", launch.EnvSecretFile, err)
		}
		return s, nil
	}
	return nil, nil
}
