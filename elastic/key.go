package elastic

import (
	"crypto/hkdf"
	"crypto/sha256"
	"fmt"
)

// keySalt labels the derivation, so the memberlist key is never equal to a
// key derived from the same secret for another purpose.
const keySalt = "ringtail elastic memberlist key v1"

// MemberlistKey derives the 32-byte AES-256-GCM key memberlist encrypts
// and authenticates every gossip packet and stream with: HKDF-SHA256 over
// the job secret, salted with a fixed label and bound to the job id, so
// two jobs sharing a secret still cannot read each other's gossip.
func MemberlistKey(secret []byte, jobID string) ([]byte, error) {
	if len(secret) == 0 {
		return nil, fmt.Errorf("elastic: empty job secret")
	}
	k, err := hkdf.Key(sha256.New, secret, []byte(keySalt), "job="+jobID, 32)
	if err != nil {
		return nil, fmt.Errorf("elastic: deriving the memberlist key: %w", err)
	}
	return k, nil
}
