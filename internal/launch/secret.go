package launch

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	"github.com/ringtail-ml/ringtail/internal/settings"
)

// NewSecret returns a random job secret: 32 bytes from crypto/rand, hex
// encoded so that it can travel in an environment variable.
func NewSecret() ([]byte, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("launch: job secret: %w", err)
	}
	return []byte(hex.EncodeToString(b)), nil
}

// NewJobID returns a random job id, "rt-" and 16 hex digits.
func NewJobID() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("launch: job id: %w", err)
	}
	return "rt-" + hex.EncodeToString(b), nil
}

// ReadSecretFile reads a job secret from a file, trimming surrounding
// white space as the runtime's RINGTAIL_SECRET_FILE does.
func ReadSecretFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("launch: secret file: %w", err)
	}
	s := bytes.TrimSpace(b)
	if err := checkSecret(s); err != nil {
		return nil, fmt.Errorf("launch: secret file %s: %w", path, err)
	}
	return s, nil
}

// checkSecret rejects secrets that cannot travel as one line of text in
// an environment variable, and those shorter than settings.MinSecretLen
// bytes (settings.ErrShortSecret).
func checkSecret(s []byte) error {
	switch {
	case len(s) == 0:
		return errors.New("the job secret is empty")
	case bytes.ContainsAny(s, "\x00\r\n"):
		return errors.New("the job secret must be one line without NUL bytes")
	}
	return settings.CheckSecret(s)
}
