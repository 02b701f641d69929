package main

import (
	"fmt"
	"os"

	"github.com/ringtail-ml/ringtail/internal/launch"
	"github.com/ringtail-ml/ringtail/internal/settings"
)

// jobSecret resolves the job secret for `run` and `coordinator`: --secret-file
// first, then RINGTAIL_SECRET or RINGTAIL_SECRET_FILE (both set is an
// error: settings.ErrTwoSecrets). It returns nil when none is given (run
// then generates one; coordinator refuses); a secret shorter than
// settings.MinSecretLen bytes is an error.
func jobSecret(secretFile string) ([]byte, error) {
	switch {
	case secretFile != "":
		s, err := launch.ReadSecretFile(secretFile)
		if err != nil {
			return nil, fmt.Errorf("--secret-file: %w", err)
		}
		return s, nil
	case os.Getenv(launch.EnvSecret) != "" && os.Getenv(launch.EnvSecretFile) != "":
		return nil, settings.ErrTwoSecrets
	case os.Getenv(launch.EnvSecret) != "":
		s := []byte(os.Getenv(launch.EnvSecret))
		if err := settings.CheckSecret(s); err != nil {
			return nil, fmt.Errorf("%s: %w", launch.EnvSecret, err)
		}
		return s, nil
	case os.Getenv(launch.EnvSecretFile) != "":
		s, err := launch.ReadSecretFile(os.Getenv(launch.EnvSecretFile))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", launch.EnvSecretFile, err)
		}
		return s, nil
	}
	return nil, nil
}
